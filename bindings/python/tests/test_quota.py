"""The retry quota: tokens spent and refunded exactly; a lease is given back at most once, and
only to its own quota."""

from __future__ import annotations

import pytest

import holdoff


def test_quota_spends_and_refunds_exactly() -> None:
    q = holdoff.RetryQuota(capacity=12)
    lease = q.acquire()
    assert (lease.cost, q.available) == (5, 7)
    with pytest.raises(holdoff.QuotaEmptyError) as e:
        q.acquire(timeout=True)
    assert (e.value.available, e.value.cost) == (7, 10)
    q.on_success(lease)
    assert q.available == 12
    q.on_success()
    assert q.available == 12


def test_a_lease_is_refunded_once() -> None:
    q = holdoff.RetryQuota(capacity=20)
    lease = q.acquire()
    q.acquire()
    assert q.available == 10 and not lease.returned
    q.on_success(lease)
    assert q.available == 15 and lease.returned
    for _ in range(3):
        with pytest.raises(holdoff.PermitError) as e:
            q.on_success(lease)
        assert e.value.code == "permit_already_recorded"
        assert str(e.value) == "this quota lease was already given back"
    assert q.available == 15


def test_a_lease_of_another_quota_is_refused() -> None:
    q, other = holdoff.RetryQuota(capacity=20), holdoff.RetryQuota(capacity=20)
    q.acquire()
    foreign = other.acquire()
    with pytest.raises(holdoff.PermitError) as e:
        q.on_success(foreign)
    assert e.value.code == "foreign_permit"
    assert q.available == 15 and not foreign.returned
    other.on_success(foreign)  # still good on its own quota
    assert other.available == 20
