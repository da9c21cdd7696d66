//! The exporter against the official SDK: a scripted scenario on the manual clock, collected
//! by `opentelemetry_sdk`'s in-memory exporter, every value and attribute asserted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use holdoff::{
    Attempted, Backoff, Breaker, BreakerConfig, BreakerGroup, BudgetConfig, Classifier, Clock, Execution,
    ExecutionConfig, ManualClock, Outcome, Policy, QuotaConfig, RetryBudget, RetryQuota, Step, Verdict,
    WaitSource,
};
use holdoff_otel::{Instruments, Target};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

struct Sdk {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

impl Sdk {
    fn new() -> Sdk {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        Sdk { provider, exporter }
    }

    fn meter(&self) -> opentelemetry::metrics::Meter {
        self.provider.meter("holdoff-test")
    }

    /// Collects now: the holdoff metrics of that collection.
    fn collect(&self) -> Collected {
        self.exporter.reset();
        self.provider.force_flush().unwrap();
        let all: Vec<ResourceMetrics> = self.exporter.get_finished_metrics().unwrap();
        // Nothing observed: the SDK exports nothing.
        assert!(all.len() <= 1, "one collection");
        let metrics: Vec<&Metric> = all
            .iter()
            .flat_map(|r| r.scope_metrics())
            .flat_map(|s| s.metrics())
            .filter(|m| m.name().starts_with("holdoff."))
            .collect();
        series(&metrics)
    }
}

struct Collected {
    /// Every point as `name{k=v,...}` (attributes sorted by key) -> value.
    all: BTreeMap<String, f64>,
    /// Per metric name: how it was exported, its unit and description.
    kinds: BTreeMap<String, (&'static str, String, String)>,
}

fn series(metrics: &[&Metric]) -> Collected {
    let mut out = BTreeMap::new();
    let mut kinds = BTreeMap::new();
    for m in metrics {
        let mut put = |attrs: Vec<(String, String)>, v: f64| {
            let mut attrs = attrs;
            attrs.sort();
            let mut key = m.name().to_string();
            if !attrs.is_empty() {
                let inner: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                key = format!("{key}{{{}}}", inner.join(","));
            }
            assert!(out.insert(key.clone(), v).is_none(), "{key} reported twice");
        };
        let attrs = |it: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| -> Vec<(String, String)> {
            it.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect()
        };
        let kind = match m.data() {
            AggregatedMetrics::U64(MetricData::Sum(s)) => {
                assert!(s.is_monotonic(), "{}", m.name());
                for p in s.data_points() {
                    put(attrs(&mut p.attributes()), p.value() as f64);
                }
                "u64 counter"
            }
            AggregatedMetrics::F64(MetricData::Sum(s)) => {
                assert!(s.is_monotonic(), "{}", m.name());
                for p in s.data_points() {
                    put(attrs(&mut p.attributes()), p.value());
                }
                "f64 counter"
            }
            AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                for p in g.data_points() {
                    put(attrs(&mut p.attributes()), p.value() as f64);
                }
                "u64 gauge"
            }
            other => panic!("{}: unexpected data {other:?}", m.name()),
        };
        let described = (kind, m.unit().to_string(), m.description().to_string());
        kinds.insert(m.name().to_string(), described);
    }
    Collected { all: out, kinds }
}

/// The points whose value is not 0 (every series is reported, zeros included).
fn nonzero(all: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    all.iter()
        .filter(|(_, v)| **v != 0.0)
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn expect(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn count_of(all: &BTreeMap<String, f64>, prefix: &str) -> usize {
    all.keys().filter(|k| k.starts_with(prefix)).count()
}

fn breaker_config() -> BreakerConfig {
    BreakerConfig {
        open_interval: Backoff::constant(Duration::from_secs(30)),
        recoveries: 1,
        ..BreakerConfig::default()
    }
}

fn attempt(b: &Breaker, outcome: Outcome) {
    let p = b.allow().unwrap();
    b.record(p, outcome).unwrap();
}

#[test]
fn a_breaker_trips_refuses_probes_and_recovers() {
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let breaker = Arc::new(Breaker::new(breaker_config(), shared).unwrap());
    // Before observing: not counted.
    attempt(&breaker, Outcome::Success);

    let sdk = Sdk::new();
    let instruments = Instruments::new(&sdk.meter());
    let observation = instruments.observe(&breaker, Some("payments")).unwrap();

    for _ in 0..5 {
        attempt(&breaker, Outcome::Failure);
    }
    assert!(breaker.allow().is_err());
    assert!(breaker.allow().is_err());
    clock.advance(Duration::from_secs(30));
    attempt(&breaker, Outcome::Success); // the probe: recovered
    attempt(&breaker, Outcome::Success);

    let Collected { all, kinds } = sdk.collect();
    assert_eq!(
        nonzero(&all),
        expect(&[
            ("holdoff.breaker.state{state=closed,upstream=payments}", 1.0),
            ("holdoff.breaker.admitted{upstream=payments}", 7.0),
            ("holdoff.breaker.refused{upstream=payments}", 2.0),
            ("holdoff.breaker.outcomes{outcome=failure,upstream=payments}", 5.0),
            ("holdoff.breaker.outcomes{outcome=success,upstream=payments}", 2.0),
            ("holdoff.breaker.probes{upstream=payments}", 1.0),
            (
                "holdoff.breaker.transitions{reason=tripped,upstream=payments}",
                1.0
            ),
            (
                "holdoff.breaker.transitions{reason=probe_admitted,upstream=payments}",
                1.0
            ),
            (
                "holdoff.breaker.transitions{reason=recovered,upstream=payments}",
                1.0
            ),
        ])
    );
    // Zeros are reported too: every state, outcome and reason.
    assert_eq!(count_of(&all, "holdoff.breaker.state{"), 5);
    assert_eq!(count_of(&all, "holdoff.breaker.outcomes{"), 6);
    assert_eq!(count_of(&all, "holdoff.breaker.transitions{"), 9);
    assert_eq!(all.len(), 24);
    assert_eq!(kinds["holdoff.breaker.state"].0, "u64 gauge");
    let admitted = &kinds["holdoff.breaker.admitted"];
    assert_eq!(admitted.0, "u64 counter");
    assert_eq!(admitted.1, "{call}");
    assert_eq!(admitted.2, "Calls the breaker admitted, probes included.");

    // Gauges are live: tripped again, the state reads open at the next collection.
    for _ in 0..5 {
        attempt(&breaker, Outcome::Timeout);
    }
    let all = sdk.collect().all;
    assert_eq!(all["holdoff.breaker.state{state=open,upstream=payments}"], 1.0);
    assert_eq!(all["holdoff.breaker.state{state=closed,upstream=payments}"], 0.0);
    assert_eq!(
        all["holdoff.breaker.outcomes{outcome=timeout,upstream=payments}"],
        5.0
    );
    assert_eq!(
        all["holdoff.breaker.transitions{reason=tripped,upstream=payments}"],
        2.0
    );

    observation.stop();
    assert!(sdk.collect().all.is_empty());
    // The instruments outlive the observation (the SDK keeps them) but no longer hold the target.
    assert_eq!(Arc::strong_count(&breaker), 1);
    drop(instruments);
}

#[test]
fn a_policy_reports_its_retries_its_breaker_and_its_quota() {
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let breaker = Arc::new(Breaker::new(breaker_config(), Arc::clone(&shared)).unwrap());
    let budget = Arc::new(RetryBudget::new(BudgetConfig::default(), shared).unwrap());
    let quota = Arc::new(RetryQuota::new(QuotaConfig::default()).unwrap());
    let policy = Arc::new(Policy::new(breaker, budget, Some(quota), Classifier::default()).unwrap());

    let sdk = Sdk::new();
    let _observation = holdoff_otel::observe(&sdk.meter(), &policy, Some("search")).unwrap();

    // One call: a failure (a backoff, 5 quota tokens), a 429 asking for 2 s (opens the breaker
    // until then; 5 more tokens), then a success as the probe (refunds the last lease).
    let mut exec = Execution::new(&*policy, ExecutionConfig::default()).unwrap();
    let mut waits = Vec::new();
    for attempted in [
        Attempted::Raised(Outcome::Failure),
        Attempted::Raised(Outcome::RetryLater(Duration::from_secs(2))),
    ] {
        assert!(matches!(exec.next_step().unwrap(), Step::Attempt(_)));
        match exec.complete(attempted).unwrap() {
            Step::Wait(w) => {
                clock.advance(w.delay);
                waits.push(w);
            }
            other => panic!("expected a wait, got {other:?}"),
        }
    }
    assert_eq!(waits[0].source, WaitSource::Backoff);
    assert_eq!(waits[1].source, WaitSource::RetryAfter);
    assert_eq!(waits[1].delay, Duration::from_secs(2));
    assert!(matches!(exec.next_step().unwrap(), Step::Attempt(p) if p.probe));
    let done = exec.complete(Attempted::Returned(Outcome::Success)).unwrap();
    assert_eq!(done, Step::Finish(Verdict::Return { attempts: 3 }));
    // A second call gets a final answer (a 404): given up as not retryable, returned.
    let mut exec = Execution::new(&*policy, ExecutionConfig::default()).unwrap();
    assert!(matches!(exec.next_step().unwrap(), Step::Attempt(_)));
    let done = exec.complete(Attempted::Returned(Outcome::Answer)).unwrap();
    assert_eq!(done, Step::Finish(Verdict::Return { attempts: 1 }));

    let Collected { all, kinds } = sdk.collect();
    let backoff = waits[0].delay.as_secs_f64();
    assert!(backoff > 0.0);
    assert_eq!(
        nonzero(&all),
        expect(&[
            ("holdoff.retry.attempts{upstream=search}", 4.0),
            ("holdoff.retry.retries{upstream=search}", 2.0),
            ("holdoff.retry.waits{source=backoff,upstream=search}", 1.0),
            ("holdoff.retry.waits{source=retry_after,upstream=search}", 1.0),
            (
                "holdoff.retry.wait.duration{source=backoff,upstream=search}",
                backoff
            ),
            (
                "holdoff.retry.wait.duration{source=retry_after,upstream=search}",
                2.0
            ),
            (
                "holdoff.retry.give_ups{reason=not_retryable,upstream=search}",
                1.0
            ),
            ("holdoff.breaker.state{state=closed,upstream=search}", 1.0),
            ("holdoff.breaker.admitted{upstream=search}", 4.0),
            ("holdoff.breaker.outcomes{outcome=failure,upstream=search}", 1.0),
            (
                "holdoff.breaker.outcomes{outcome=retry_later,upstream=search}",
                1.0
            ),
            ("holdoff.breaker.outcomes{outcome=success,upstream=search}", 1.0),
            ("holdoff.breaker.outcomes{outcome=answer,upstream=search}", 1.0),
            ("holdoff.breaker.probes{upstream=search}", 1.0),
            (
                "holdoff.breaker.transitions{reason=retry_later,upstream=search}",
                1.0
            ),
            (
                "holdoff.breaker.transitions{reason=probe_admitted,upstream=search}",
                1.0
            ),
            (
                "holdoff.breaker.transitions{reason=recovered,upstream=search}",
                1.0
            ),
            // 500 tokens, 5 for each retry, the last lease refunded by the success.
            ("holdoff.quota.tokens{upstream=search}", 495.0),
        ])
    );
    assert_eq!(kinds["holdoff.retry.wait.duration"].0, "f64 counter");
    assert_eq!(kinds["holdoff.retry.wait.duration"].1, "s");
    assert_eq!(kinds["holdoff.quota.tokens"].0, "u64 gauge");
    assert_eq!(count_of(&all, "holdoff.retry.give_ups{"), 10);
    assert_eq!(all["holdoff.quota.refused{upstream=search}"], 0.0);
    // 24 breaker series, 19 retry series, 2 quota series.
    assert_eq!(all.len(), 45);
}

#[test]
fn a_group_reports_its_breakers_under_their_keys() {
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let group = Arc::new(BreakerGroup::with_max_keys(breaker_config(), 2, shared).unwrap());
    attempt(&group.get("a"), Outcome::Success); // before observing: not counted

    let sdk = Sdk::new();
    let instruments = Instruments::new(&sdk.meter());
    let _g = instruments.observe(Arc::clone(&group), None).unwrap();
    let quota = Arc::new(RetryQuota::new(QuotaConfig::default()).unwrap());
    let _q = instruments.observe(Target::Quota(quota), Some("shared")).unwrap();

    for _ in 0..5 {
        attempt(&group.get("a"), Outcome::Failure);
    }
    attempt(&group.get("b"), Outcome::Answer);
    clock.advance(Duration::from_secs(1));
    // A third key in a group of two evicts an idle closed breaker ("b"), never the open "a".
    attempt(&group.get("c"), Outcome::Success);

    let all = sdk.collect().all;
    assert_eq!(group.keys(), ["a", "c"]);
    assert_eq!(
        nonzero(&all),
        expect(&[
            ("holdoff.group.keys", 2.0),
            ("holdoff.group.evictions", 1.0),
            ("holdoff.quota.tokens{upstream=shared}", 500.0),
            ("holdoff.breaker.state{state=open,upstream=a}", 1.0),
            ("holdoff.breaker.admitted{upstream=a}", 5.0),
            ("holdoff.breaker.outcomes{outcome=failure,upstream=a}", 5.0),
            ("holdoff.breaker.transitions{reason=tripped,upstream=a}", 1.0),
            ("holdoff.breaker.state{state=closed,upstream=c}", 1.0),
            ("holdoff.breaker.admitted{upstream=c}", 1.0),
            ("holdoff.breaker.outcomes{outcome=success,upstream=c}", 1.0),
        ])
    );
    assert_eq!(all.len(), 2 + 2 * 24 + 2);
}

#[test]
fn upstream_is_checked() {
    let sdk = Sdk::new();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let group = Arc::new(BreakerGroup::new(breaker_config(), Arc::clone(&clock)).unwrap());
    let err = holdoff_otel::observe(&sdk.meter(), &group, Some("x")).unwrap_err();
    assert_eq!(err.field, "upstream");
    let breaker = Arc::new(Breaker::new(breaker_config(), clock).unwrap());
    let err = holdoff_otel::observe(&sdk.meter(), &breaker, Some("")).unwrap_err();
    assert_eq!(err.field, "upstream");
    assert_eq!(err.rule, "must not be empty");
}
