//! The rules of `apply`, case by case, on store milliseconds (`record.rs`).

use super::*;

fn claim_op(worker: &str, episode: u64) -> FleetOp {
    FleetOp::Claim {
        worker: worker.into(),
        episode,
        max_probes: 1,
        interval_ms: 1000,
        probe_timeout_ms: 1000,
        max_wait_ms: 60_000,
    }
}

fn answer_op(worker: &str, episode: u64, ok: bool) -> FleetOp {
    FleetOp::Answer {
        worker: worker.into(),
        episode,
        ok,
        recoveries_needed: 2,
        reopen_ms: 4000,
    }
}

fn opened(delay_ms: u64) -> FleetRecord {
    let mut r = FleetRecord::default();
    let op = FleetOp::Open {
        seen_episode: 1,
        delay_ms,
        retry_later: false,
    };
    assert_eq!(apply(&mut r, &op, 0), Reply::Applied);
    r
}

#[test]
fn open_from_closed_starts_an_episode_and_a_second_trip_does_not_push_it() {
    let mut r = opened(1000);
    assert_eq!((r.episode, r.state, r.next_probe_at), (1, FleetState::Open, 1000));
    let trip = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 5000,
        retry_later: false,
    };
    assert_eq!(apply(&mut r, &trip, 10), Reply::Ignored);
    assert_eq!(r.next_probe_at, 1000);
    let later = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 5000,
        retry_later: true,
    };
    assert_eq!(apply(&mut r, &later, 10), Reply::Applied);
    assert_eq!(r.next_probe_at, 5010);
    let shorter = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 100,
        retry_later: true,
    };
    apply(&mut r, &shorter, 20);
    assert_eq!((r.next_probe_at, r.episode), (5010, 1));
}

#[test]
fn a_flushed_record_takes_back_the_workers_episode() {
    let mut r = FleetRecord::default();
    let op = FleetOp::Open {
        seen_episode: 7,
        delay_ms: 300,
        retry_later: false,
    };
    apply(&mut r, &op, 50);
    assert_eq!((r.episode, r.next_probe_at, r.updated_at), (7, 350, 50));
}

#[test]
fn one_grant_per_window_and_lost_leases_keep_the_window_spent() {
    let mut r = opened(1000);
    assert_eq!(apply(&mut r, &claim_op("a", 1), 999), Reply::Refused);
    assert_eq!(
        apply(&mut r, &claim_op("a", 1), 1000),
        Reply::Granted { expires_at: 2000 }
    );
    assert_eq!(apply(&mut r, &claim_op("b", 1), 1000), Reply::Refused);
    assert_eq!(r.next_probe_at, 2000);
    assert_eq!(apply(&mut r, &claim_op("b", 0), 2000), Reply::Refused);
    // "a"'s lease is lost at 2000: its answer is stale and moves nothing.
    assert_eq!(apply(&mut r, &answer_op("a", 1, true), 2000), Reply::Ignored);
    assert_eq!(
        apply(&mut r, &claim_op("b", 1), 2000),
        Reply::Granted { expires_at: 3000 }
    );
}

#[test]
fn recovery_counts_answers_from_any_worker_and_a_failure_reopens_with_the_next_step() {
    let mut r = opened(0);
    apply(&mut r, &claim_op("a", 1), 0);
    assert_eq!(apply(&mut r, &answer_op("a", 1, true), 10), Reply::Applied);
    assert_eq!(r.recoveries, 1);
    apply(&mut r, &claim_op("b", 1), 1000);
    // A stale failure resets the count; a stale success does not move it.
    assert_eq!(apply(&mut r, &answer_op("c", 1, true), 1010), Reply::Ignored);
    assert_eq!(apply(&mut r, &answer_op("c", 0, false), 1010), Reply::Applied);
    assert_eq!(r.recoveries, 0);
    assert_eq!(apply(&mut r, &answer_op("b", 1, false), 1020), Reply::Applied);
    assert_eq!((r.step, r.next_probe_at, r.state), (1, 5020, FleetState::Open));
    apply(&mut r, &claim_op("a", 1), 5020);
    apply(&mut r, &answer_op("a", 1, true), 5030);
    apply(&mut r, &claim_op("b", 1), 6020);
    apply(&mut r, &answer_op("b", 1, true), 6030);
    assert_eq!((r.state, r.episode, r.step), (FleetState::Closed, 1, 0));
}

#[test]
fn admit_moves_the_lease_to_the_admission_and_implausible_deadlines_are_due() {
    let mut r = opened(1000);
    assert_eq!(
        apply(&mut r, &claim_op("a", 1), 1000),
        Reply::Granted { expires_at: 2000 }
    );
    let admit = |worker: &str, episode| FleetOp::Admit {
        worker: worker.into(),
        episode,
        probe_timeout_ms: 1000,
    };
    assert_eq!(apply(&mut r, &admit("b", 1), 1300), Reply::Ignored);
    assert_eq!(apply(&mut r, &admit("a", 2), 1300), Reply::Ignored);
    assert_eq!(apply(&mut r, &admit("a", 1), 1300), Reply::Applied);
    assert_eq!((r.leases[0].expires_at, r.updated_at), (2300, 1300));
    // Still held at 2100, where the grant's own expiry would have lost it.
    assert_eq!(apply(&mut r, &answer_op("a", 1, true), 2100), Reply::Applied);
    assert_eq!(r.recoveries, 1);
    // A deadline beyond the claimer's longest wait (60 s) is due; a ghost lease is dropped.
    r.next_probe_at = MAX_STORE_VALUE;
    r.leases = vec![Lease {
        worker: "ghost".into(),
        expires_at: MAX_STORE_VALUE,
    }];
    assert_eq!(
        apply(&mut r, &claim_op("b", 1), 3000),
        Reply::Granted { expires_at: 4000 }
    );
    assert_eq!((r.leases.len(), r.next_probe_at), (1, 4000));
    // Within the longest wait, the deadline stands.
    r.next_probe_at = 50_000;
    assert_eq!(apply(&mut r, &claim_op("c", 1), 4000), Reply::Refused);
}

#[test]
fn a_failed_probe_never_brings_a_known_deadline_forward() {
    // B holds a grant; A learns a 60 s Retry-After while B's probe is in flight; B fails.
    let mut r = opened(0);
    apply(&mut r, &claim_op("b", 1), 0);
    let later = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 60_000,
        retry_later: true,
    };
    apply(&mut r, &later, 10);
    assert_eq!(r.hold_until, 60_010);
    assert_eq!(apply(&mut r, &answer_op("b", 1, false), 20), Reply::Applied);
    assert_eq!((r.next_probe_at, r.step), (60_010, 1));
    // The episode's close forgets the deadline; a trip's episode has none.
    apply(&mut r, &claim_op("b", 1), 60_010);
    apply(&mut r, &answer_op("b", 1, true), 60_020);
    apply(&mut r, &claim_op("b", 1), 61_010);
    apply(&mut r, &answer_op("b", 1, true), 61_020);
    assert_eq!((r.state, r.hold_until), (FleetState::Closed, 0));
    let trip = FleetOp::Open {
        seen_episode: 2,
        delay_ms: 0,
        retry_later: false,
    };
    apply(&mut r, &trip, 70_000);
    assert_eq!((r.episode, r.hold_until), (2, 0));
}

#[test]
fn a_failed_probe_after_a_retry_later_waits_the_next_step_not_the_rearmed_window() {
    // The episode opens on a 300 s Retry-After: its probe window is the provider's delay.
    let mut r = FleetRecord::default();
    let later = FleetOp::Open {
        seen_episode: 1,
        delay_ms: 300_000,
        retry_later: true,
    };
    assert_eq!(apply(&mut r, &later, 0), Reply::Applied);
    assert_eq!((r.next_probe_at, r.hold_until), (300_000, 300_000));
    let claim = FleetOp::Claim {
        worker: "a".into(),
        episode: 1,
        max_probes: 1,
        interval_ms: 300_000,
        probe_timeout_ms: 1000,
        max_wait_ms: 300_000,
    };
    apply(&mut r, &claim, 300_000);
    assert_eq!(r.next_probe_at, 600_000, "the grant re-arms the window");
    let failed = FleetOp::Answer {
        worker: "a".into(),
        episode: 1,
        ok: false,
        recoveries_needed: 2,
        reopen_ms: 30_000,
    };
    assert_eq!(apply(&mut r, &failed, 300_010), Reply::Applied);
    assert_eq!((r.next_probe_at, r.step), (330_010, 1));
}

#[test]
fn a_reset_closes_the_episode_it_saw_and_no_later_one() {
    let mut r = opened(0);
    apply(&mut r, &claim_op("a", 1), 0);
    apply(&mut r, &answer_op("a", 1, false), 10);
    apply(&mut r, &claim_op("b", 1), 60_010);
    assert_eq!((r.step, r.leases.len()), (1, 1));
    let reset = |seen_episode| FleetOp::Reset { seen_episode };
    assert_eq!(
        apply(&mut r, &reset(0), 60_020),
        Reply::Ignored,
        "a later episode stands"
    );
    assert_eq!(r.state, FleetState::Open);
    assert_eq!(apply(&mut r, &reset(1), 60_030), Reply::Applied);
    assert_eq!(
        (
            r.state,
            r.episode,
            r.step,
            r.recoveries,
            r.window_granted,
            r.leases.len(),
            r.updated_at
        ),
        (FleetState::Closed, 1, 0, 0, 0, 0, 60_030)
    );
    assert_eq!(apply(&mut r, &reset(5), 60_040), Reply::Ignored, "already closed");
    let trip = FleetOp::Open {
        seen_episode: 2,
        delay_ms: 100,
        retry_later: false,
    };
    assert_eq!(apply(&mut r, &trip, 60_050), Reply::Applied);
    assert_eq!((r.state, r.episode), (FleetState::Open, 2), "a new episode");
}

#[test]
fn validation_refuses_hostile_records() {
    let mut r = opened(0);
    assert!(r.validate().is_ok());
    r.leases = vec![
        Lease {
            worker: "w".into(),
            expires_at: 1
        };
        MAX_LEASES + 1
    ];
    assert!(r.validate().unwrap_err().starts_with("leases"));
    let mut r = FleetRecord {
        state: FleetState::Open,
        ..FleetRecord::default()
    };
    assert!(r.validate().unwrap_err().starts_with("episode"));
    r.episode = 1;
    r.recoveries = 5000;
    assert!(r.validate().unwrap_err().starts_with("recoveries"));
}
