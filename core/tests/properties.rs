//! Property tests of the invariants of `docs/contract.md` §3-§4, over random operation sequences
//! on the manual clock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use holdoff::{
    Backoff, Breaker, BreakerConfig, BudgetConfig, Decision, Effect, ManualClock, Outcome, Permit, Reason,
    RetryBudget, RetryState, TripPolicy,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Allow,
    /// Record the permit at this index (mod held) with this outcome.
    Record(usize, OutcomeKind),
    Advance(u64),
    Drop(usize),
}

#[derive(Debug, Clone, Copy)]
enum OutcomeKind {
    Success,
    Answer,
    Failure,
    Timeout,
    RetryLater(u64),
    Cancelled,
}

impl OutcomeKind {
    fn outcome(self) -> Outcome {
        match self {
            OutcomeKind::Success => Outcome::Success,
            OutcomeKind::Answer => Outcome::Answer,
            OutcomeKind::Failure => Outcome::Failure,
            OutcomeKind::Timeout => Outcome::Timeout,
            OutcomeKind::RetryLater(ms) => Outcome::RetryLater(Duration::from_millis(ms)),
            OutcomeKind::Cancelled => Outcome::Cancelled,
        }
    }
}

fn outcome_kind() -> impl Strategy<Value = OutcomeKind> {
    prop_oneof![
        3 => Just(OutcomeKind::Success),
        1 => Just(OutcomeKind::Answer),
        4 => Just(OutcomeKind::Failure),
        1 => Just(OutcomeKind::Timeout),
        1 => (0u64..400_000).prop_map(OutcomeKind::RetryLater),
        1 => Just(OutcomeKind::Cancelled),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Allow),
        4 => (0usize..64, outcome_kind()).prop_map(|(i, o)| Op::Record(i, o)),
        // Jumps up to ~31 years; the end of the clock axis, where time stops and no interval can
        // pass, is covered by the case regressions.probe_admitted_at_end_of_clock_axis_can_close.
        3 => prop_oneof![0u64..2_000, 0u64..400_000, Just(1_000_000_000_000)].prop_map(Op::Advance),
        1 => (0usize..64).prop_map(Op::Drop),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    (
        prop_oneof![
            (1u32..6).prop_map(|t| TripPolicy::ConsecutiveFailures { threshold: t }),
            (1u32..6, 1u64..20_000).prop_map(|(t, w)| TripPolicy::FailuresInWindow {
                threshold: t,
                window: Duration::from_millis(w)
            }),
            (0.1f64..=1.0, 1u32..6, 1u64..20_000, 1u32..10).prop_map(|(r, m, w, b)| {
                TripPolicy::FailureRate {
                    threshold: r,
                    min_calls: m,
                    window: Duration::from_millis(w.max(u64::from(b))),
                    buckets: b,
                }
            }),
        ],
        1u64..60_000,
        1.0f64..3.0,
        0u64..300_000,
        0.0f64..0.9,
        1u32..4,
        1u32..3,
        proptest::option::of(1u64..120_000),
        1u64..600_000,
        any::<u64>(),
    )
        .prop_map(
            |(trip, initial, mult, extra, jitter, recoveries, probes, timeout, guard, seed)| BreakerConfig {
                trip,
                open_interval: Backoff {
                    initial: Duration::from_millis(initial),
                    multiplier: mult,
                    max: Duration::from_millis(initial + extra),
                    jitter,
                },
                recoveries,
                max_probes_in_flight: probes,
                probe_timeout: timeout.map(Duration::from_millis),
                max_retry_later: Duration::from_millis(guard),
                seed,
            },
        )
}

/// The longest any refusal may ask a caller to wait under `cfg`.
fn longest_wait(cfg: &BreakerConfig) -> Duration {
    let timeout = cfg.probe_timeout.unwrap_or(Duration::ZERO);
    cfg.open_interval
        .max
        .max(cfg.max_retry_later)
        .max(timeout)
        .max(cfg.open_interval.max)
}

// Miri runs a case thousands of times slower (up to a minute): two still check the code it runs.
const CASES: u32 = if cfg!(miri) { 2 } else { 400 };

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        // Under Miri, no replay of the saved regressions either (a minute each there).
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn breaker_invariants(cfg in config(), ops in proptest::collection::vec(op(), 1..200)) {
        let clock = ManualClock::new();
        let b = Breaker::new(cfg.clone(), Arc::new(clock.clone())).unwrap();
        let mut held: VecDeque<Permit> = VecDeque::new();
        // Consecutive current-episode probe answers since the last failure of any kind while not closed.
        let mut streak = 0u32;
        let limit = longest_wait(&cfg);
        for op in ops {
            match op {
                Op::Allow => match b.allow() {
                    Ok(p) => held.push_back(p),
                    Err(r) => {
                        let wait = r.retry_after.expect("never forced open here");
                        prop_assert!(wait <= limit, "retry_after {wait:?} above every configured wait {limit:?}");
                    }
                },
                Op::Record(i, kind) if !held.is_empty() => {
                    let p = held.remove(i % held.len()).unwrap();
                    let was_probe = p.is_probe();
                    // A probe of the current episode that is no longer in flight was lost (or
                    // discarded by a failed sibling): its late answer moves nothing.
                    let this_episode = was_probe && p.episode() == b.snapshot().episode;
                    let outcome = kind.outcome();
                    let effect = b.record(p, outcome).unwrap();
                    let failure = matches!(kind, OutcomeKind::Failure | OutcomeKind::Timeout)
                        || matches!(kind, OutcomeKind::RetryLater(_));
                    let moves_nothing = effect == Effect::Stale && this_episode;
                    if failure && !moves_nothing && b.snapshot().state != holdoff::State::Closed {
                        streak = 0;
                    }
                    if was_probe && effect == Effect::Counted
                        && matches!(kind, OutcomeKind::Success | OutcomeKind::Answer)
                    {
                        streak += 1;
                    }
                }
                Op::Record(..) => {}
                Op::Advance(ms) => {
                    // Stay below ~317 years so that an interval can always still pass.
                    if clock.peek().as_nanos() / 1_000_000 + ms < 10_000_000_000_000 {
                        clock.advance(Duration::from_millis(ms));
                    }
                }
                Op::Drop(i) if !held.is_empty() => { held.remove(i % held.len()); }
                Op::Drop(_) => {}
            }
            let snap = b.snapshot();
            prop_assert!(snap.probes_in_flight <= cfg.max_probes_in_flight);
            prop_assert!(snap.recoveries < cfg.recoveries);
            for ev in b.drain_events() {
                if ev.reason == Reason::Recovered {
                    prop_assert!(streak >= cfg.recoveries, "closed after {streak} answers, needs {}", cfg.recoveries);
                }
                if ev.to != holdoff::State::Closed && ev.reason != Reason::ProbeAdmitted {
                    streak = 0;
                }
                if ev.reason == Reason::Recovered {
                    streak = 0;
                }
            }
        }
        // Whatever happened, once the upstream recovers the breaker admits a probe within the
        // longest configured wait, and closes after `recoveries` answers one interval apart:
        // lost and dropped probes never latch it.
        drop(held);
        for _ in 0..cfg.recoveries + 1 {
            if b.snapshot().state == holdoff::State::Closed {
                break;
            }
            clock.advance(limit);
            let p = b.allow();
            prop_assert!(p.is_ok(), "no probe admitted a full {limit:?} later: {:?}", b.snapshot());
            b.record(p.unwrap(), Outcome::Success).unwrap();
        }
        prop_assert_eq!(b.snapshot().state, holdoff::State::Closed);
    }

    #[test]
    fn budget_never_plans_past_the_budget(
        cap_s in 1u64..600,
        extra_s in 0u64..3600,
        steps in proptest::collection::vec((0u64..700_000, prop_oneof![
            3 => (1u64..2_000_000).prop_map(Some),
            1 => Just(None),
        ]), 1..60),
    ) {
        let cap = Duration::from_secs(cap_s);
        let cfg = BudgetConfig {
            max_rate_limit_duration: cap * 2 + Duration::from_secs(extra_s),
            retry_after_cap: cap,
            ..BudgetConfig::default()
        };
        let clock = ManualClock::new();
        let budget = RetryBudget::new(cfg.clone(), Arc::new(clock.clone())).unwrap();
        let mut call = RetryState::new();
        let mut start: Option<holdoff::Instant> = None;
        for (advance, ra) in steps {
            let now = clock.advance(Duration::from_millis(advance));
            let outcome = match ra {
                Some(ms) => Outcome::RetryLater(Duration::from_millis(ms)),
                None => Outcome::Success,
            };
            match budget.decide(&mut call, outcome) {
                Decision::Retry { delay, capped, server_delay, .. } => {
                    let s = *start.get_or_insert(now);
                    prop_assert!(delay <= cap);
                    prop_assert!(!delay.is_zero());
                    let server = server_delay.unwrap();
                    prop_assert_eq!(capped, server > cap);
                    prop_assert!(delay == server.min(cap), "shortened: {delay:?} for {server:?}");
                    prop_assert!(now.saturating_since(s) + delay <= cfg.max_rate_limit_duration,
                        "planned wait runs past the budget");
                }
                Decision::Done => start = None,
                Decision::GiveUp { .. } => {
                    if start.is_none() { start = Some(now); }
                }
            }
        }
    }

    #[test]
    fn retry_after_parsing_never_panics(
        value in prop_oneof![
            any::<String>(),
            "[A-Za-z]{3,9}, [0-9]{2}[- ][A-Za-z]{3}[- ][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT",
            "[A-Za-z]{3} [A-Za-z]{3} [ 0-9]{2} [0-9:]{8} [0-9]{4}",
            "[ \t]*[-+]?[0-9]{0,25}(\\.[0-9]{0,12})?[ \t,0-9]*",
        ],
        wall_secs in 0u64..300_000_000_000,
    ) {
        let wall = std::time::UNIX_EPOCH + Duration::from_secs(wall_secs);
        let _ = holdoff::parse_retry_after(&value, wall);
        let _ = holdoff::hint_from_headers([("Retry-After", value.as_str()), ("X-RateLimit-Reset", value.as_str())], wall);
    }

    #[test]
    fn backoff_never_overflows(initial in 1u64..u64::MAX / 2, mult in 1.0f64..1e6, n in any::<u32>(), jitter in 0.0f64..0.99, seed: u64) {
        let b = Backoff {
            initial: Duration::from_nanos(initial),
            multiplier: mult,
            max: Duration::from_nanos(initial.saturating_mul(3)),
            jitter,
        };
        let mut rng = holdoff::Prng::new(seed);
        let d = b.interval(n, &mut rng);
        prop_assert!(d <= b.max.max(Duration::from_millis(1)));
        prop_assert!(b.base(n) >= b.initial.min(b.max));
    }
}
