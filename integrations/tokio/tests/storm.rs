//! A deadline storm on tokio's paused clock: twenty callers with 100 ms attempt deadlines
//! against an upstream that never answers, for six seconds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use holdoff::{
    Backoff, Breaker, BreakerConfig, BudgetConfig, Classifier, Outcome, Policy, RetryBudget, State,
    TripPolicy,
};
use holdoff_tokio::{execute_with, Error, Options, TokioClock};
use tokio::time::{sleep, timeout_at, Instant};

const CALLERS: usize = 20;
const DEADLINE: Duration = Duration::from_millis(100);
const INTERVAL: Duration = Duration::from_secs(1);
const STORM: Duration = Duration::from_secs(6);

#[tokio::test(start_paused = true)]
async fn a_deadline_storm_sends_one_probe_per_interval_and_leaves_the_breaker_open() {
    let clock = TokioClock::shared();
    let breaker = BreakerConfig {
        trip: TripPolicy::ConsecutiveFailures { threshold: 1 },
        open_interval: Backoff::constant(INTERVAL),
        ..BreakerConfig::default()
    };
    let policy = Arc::new(
        Policy::new(
            Arc::new(Breaker::new(breaker, clock.clone()).unwrap()),
            Arc::new(RetryBudget::new(BudgetConfig::default(), clock).unwrap()),
            None,
            Classifier::default(),
        )
        .unwrap(),
    );
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let o = outcomes.clone();
    let options = Options::new()
        .attempt_timeout(DEADLINE)
        .unwrap()
        .after_attempt(move |a| o.lock().unwrap().push(a.outcome));

    // The upstream notes when each request reached it, and never answers.
    let start = Instant::now();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let end = start + STORM;

    let caller = |first_at: Duration| {
        let (policy, options, requests) = (policy.clone(), options.clone(), requests.clone());
        async move {
            sleep(first_at).await;
            loop {
                let upstream = || {
                    requests.lock().unwrap().push(start.elapsed().as_millis());
                    std::future::pending::<Result<(), ()>>()
                };
                match execute_with(&policy, &options, upstream, |_| Outcome::Success).await {
                    // Come back when the breaker may admit a probe.
                    Err(Error::BreakerOpen {
                        retry_after: Some(d), ..
                    }) => sleep(d).await,
                    Err(Error::GiveUp { .. }) => {}
                    other => panic!("a hanging upstream cannot answer: {other:?}"),
                }
            }
        }
    };
    // The first caller meets the closed breaker alone: its deadline expires at 100 ms, a
    // timeout, which trips the breaker. The other nineteen arrive then.
    let mut tasks = vec![tokio::spawn(timeout_at(end, caller(Duration::ZERO)))];
    for _ in 1..CALLERS {
        tasks.push(tokio::spawn(timeout_at(end, caller(DEADLINE))));
    }
    for t in tasks {
        assert!(t.await.unwrap().is_err(), "every caller is still calling at 6 s");
    }

    // One probe per interval: the breaker opens at 0.1 s; each probe goes when the interval
    // ends, hits its deadline 100 ms later and re-opens the breaker from there.
    let seen = requests.lock().unwrap().clone();
    assert_eq!(seen, vec![0, 1100, 2200, 3300, 4400, 5500]);
    assert!(seen.len() <= 7);
    let o = outcomes.lock().unwrap().clone();
    assert_eq!(o, vec![Outcome::Timeout; 6], "every deadline is a timeout");
    let s = policy.breaker().snapshot();
    assert_eq!(s.state, State::Open, "open: not closed, not stuck half-open");
    assert_eq!((s.probes, s.probes_in_flight), (5, 0));
    assert_eq!(s.retry_after, Some(Duration::from_millis(600)));
}
