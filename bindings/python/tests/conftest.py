"""Shared test setup: prints the plain tally line `N passed, N failed, N skipped` as the very
last line of the run (after pytest's own summary), which `make conformance` and CI read."""

from __future__ import annotations

from typing import Any

import pytest

_TALLY: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}
_SEEN: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # One verdict per test: a failure in setup/teardown counts as a failure of that test.
    if report.when == "call" or report.outcome != "passed":
        previous = _SEEN.get(report.nodeid)
        if previous == "failed":
            return
        verdict = "failed" if report.outcome == "failed" else report.outcome
        if verdict not in _TALLY:
            return
        if previous is not None:
            _TALLY[previous] -= 1
        _SEEN[report.nodeid] = verdict
        _TALLY[verdict] += 1


def pytest_unconfigure(config: Any) -> None:
    if getattr(config.option, "collectonly", False):
        return
    print(
        f"\n{_TALLY['passed']} passed, {_TALLY['failed']} failed, {_TALLY['skipped']} skipped",
        flush=True,
    )
