//! Arbitrary operation sequences into one breaker, one retry budget, one quota and the policy
//! that composes them, on one manual clock; the invariants of `docs/contract.md` §3-§4 are
//! checked after every step. The breaker invariants extend `core/tests/properties.rs`
//! (`breaker_invariants`, `budget_never_plans_past_the_budget`), whose configuration ranges and
//! `longest_wait` bound are mirrored here so that the two agree on what a valid run is.
//!
//! Operations: allow, record (any outcome, cancel included) or drop a held permit; advance the
//! clock (bounded, below ~317 years as in the property tests); a policy attempt (`before`) and
//! its answer as an outcome or an HTTP response with Retry-After / RateLimit-Reset headers; a
//! budget decision for a direct caller; reset, force open, disable; quota acquire and refund.
//!
//! After every step:
//! * the state changes drained since the last step start at the previous state, end at the
//!   snapshot's state, are stamped with the step's one clock reading, follow only the allowed
//!   edges with the right reasons and episode numbers, and none was dropped;
//! * probes in flight never exceed the maximum; recovery progress stays below `recoveries`, only
//!   grows by one, and only on a success or answer to a live probe of the current episode; a
//!   close (`recovered`) needs that answer to be the `recoveries`-th;
//! * opens and closes in the snapshot count exactly the trips and recoveries seen;
//! * a snapshot's `probe_ready` and `retry_after` predict the next `allow` exactly (the view has
//!   no side effects and the admission is the one act);
//! * every refusal's wait is at most the longest configured wait;
//! * a retry never waits less than the server's Retry-After (after the cap), a capped wait says
//!   so, a planned wait fits the budget left from the one clock reading, give-ups have their
//!   stated cause, a breaker-sourced delay equals the breaker's own wait;
//! * counters balance: admitted = recorded + cancelled + dropped + held; the breaker's probe
//!   and refusal counters equal the harness's; stale answers grow by at most one per record;
//!   quota tokens stay within capacity;
//! * finally, once the upstream is healthy, the breaker admits a probe within the longest wait
//!   and closes after `recoveries` answers: nothing latches it open or half-open.
#![no_main]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbitrary::Arbitrary;
use holdoff::interop::{Coded, ErrorKind};
use holdoff::{
    Backoff, Before, Breaker, BreakerConfig, BudgetConfig, Call, Classifier, ClassifierConfig, Clock,
    Decision, Effect, GiveUpReason, Instant, ManualClock, Outcome, Permit, Policy, QuotaConfig, QuotaLease,
    Reason, RetryBudget, RetryQuota, RetryState, Snapshot, State, WaitSource,
};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Cfg {
    trip_kind: u8,
    threshold: u8,
    window_ms: u16,
    rate_pct: u8,
    buckets: u8,
    initial_ms: u16,
    mult_tenths: u8,
    extra_ms: u32,
    jitter_pct: u8,
    recoveries: u8,
    probes: u8,
    timeout_ms: Option<u32>,
    guard_ms: u32,
    seed: u64,
    cap_s: u16,
    extra_budget_s: u16,
    max_retries: u8,
    short_backoff_budget_s: Option<u16>,
    quota: Option<(u8, u8, u8, u8)>,
    blocked_403: bool,
    rate_limit_wait_ms: Option<u16>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Out {
    Success,
    Answer,
    Failure,
    Timeout,
    RetryLater(u32),
    Cancelled,
}

impl Out {
    fn outcome(self) -> Outcome {
        match self {
            Out::Success => Outcome::Success,
            Out::Answer => Outcome::Answer,
            Out::Failure => Outcome::Failure,
            Out::Timeout => Outcome::Timeout,
            Out::RetryLater(ms) => Outcome::RetryLater(Duration::from_millis(u64::from(ms % 400_000))),
            Out::Cancelled => Outcome::Cancelled,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Adv {
    Small(u16),
    Medium(u32),
    Huge,
    /// By the snapshot's wait, to land exactly on a probe time.
    ToProbe,
}

#[derive(Arbitrary, Debug, Clone)]
enum Hint {
    None,
    Secs(u16),
    Millis(u32),
    /// An HTTP-date this many seconds from the wall time of now.
    Date(i32),
    RateLimitReset(u16),
    Raw(String),
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Allow,
    Record { idx: u8, out: Out },
    Drop { idx: u8 },
    Advance(Adv),
    Before { call: u8 },
    After { idx: u8, out: Out },
    Response { idx: u8, status: u16, hint: Hint },
    Decide { call: u8, out: Out },
    Reset,
    ForceOpen,
    Disable,
    QuotaAcquire { timeout: bool },
    QuotaSuccess { refund: bool },
    NewCall { call: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    cfg: Cfg,
    ops: Vec<Op>,
}

struct Held {
    permit: Permit,
    call: Option<usize>,
    episode: u32,
    admitted: Instant,
    /// `None` for a call admitted while closed; for a probe, how long it holds its slot.
    timeout: Option<Duration>,
}

fn breaker_config(c: &Cfg) -> BreakerConfig {
    use holdoff::TripPolicy;
    let threshold = u32::from(c.threshold % 5) + 1;
    let window = Duration::from_millis(u64::from(c.window_ms % 20_000) + 1);
    let trip = match c.trip_kind % 3 {
        0 => TripPolicy::ConsecutiveFailures { threshold },
        1 => TripPolicy::FailuresInWindow { threshold, window },
        _ => {
            let buckets = u32::from(c.buckets % 9) + 1;
            TripPolicy::FailureRate {
                threshold: f64::from(c.rate_pct % 91 + 10) / 100.0,
                min_calls: threshold,
                window: window.max(Duration::from_millis(u64::from(buckets))),
                buckets,
            }
        }
    };
    let initial = u64::from(c.initial_ms % 60_000) + 1;
    BreakerConfig {
        trip,
        open_interval: Backoff {
            initial: Duration::from_millis(initial),
            multiplier: 1.0 + f64::from(c.mult_tenths % 20) / 10.0,
            max: Duration::from_millis(initial + u64::from(c.extra_ms % 300_000)),
            jitter: f64::from(c.jitter_pct % 90) / 100.0,
        },
        recoveries: u32::from(c.recoveries % 3) + 1,
        max_probes_in_flight: u32::from(c.probes % 2) + 1,
        probe_timeout: c
            .timeout_ms
            .map(|t| Duration::from_millis(u64::from(t % 120_000) + 1)),
        max_retry_later: Duration::from_millis(u64::from(c.guard_ms % 600_000) + 1),
        seed: c.seed,
    }
}

fn budget_config(c: &Cfg) -> BudgetConfig {
    let cap = Duration::from_secs(u64::from(c.cap_s % 600) + 1);
    BudgetConfig {
        max_rate_limit_duration: cap * 2 + Duration::from_secs(u64::from(c.extra_budget_s % 3600)),
        retry_after_cap: cap,
        max_retries: u32::from(c.max_retries % 13),
        max_backoff_duration: match c.short_backoff_budget_s {
            Some(s) => Duration::from_secs(u64::from(s % 600) + 1),
            None => BudgetConfig::default().max_backoff_duration,
        },
        seed: c.seed ^ 0x5eed,
        // A bit of the seed rather than a field of its own, so the committed seeds keep their
        // meaning.
        give_up_above_cap: c.seed & 0x100 != 0,
        ..BudgetConfig::default()
    }
}

fn quota_config(c: &Cfg) -> Option<QuotaConfig> {
    let (cap, retry, timeout, refill) = c.quota?;
    let capacity = u64::from(cap % 50) + 1;
    Some(QuotaConfig {
        capacity,
        retry_cost: u64::from(retry) % capacity + 1,
        timeout_cost: u64::from(timeout) % capacity + 1,
        success_refill: u64::from(refill) % (capacity + 1),
    })
}

/// The longest any refusal may ask a caller to wait (as in `core/tests/properties.rs`).
fn longest_wait(cfg: &BreakerConfig) -> Duration {
    let timeout = cfg.probe_timeout.unwrap_or(Duration::ZERO);
    cfg.open_interval.max.max(cfg.max_retry_later).max(timeout)
}

const CALLS: usize = 4;
/// Below ~317 years of virtual time an interval can always still pass (properties.rs).
const CLOCK_LIMIT_MS: u64 = 10_000_000_000_000;
const WALL_ORIGIN_S: u64 = 1_559_559_600;

struct World {
    clock: ManualClock,
    cfg: BreakerConfig,
    bcfg: BudgetConfig,
    qcfg: Option<QuotaConfig>,
    breaker: Arc<Breaker>,
    budget: Arc<RetryBudget>,
    quota: Option<Arc<RetryQuota>>,
    policy: Policy,
    held: Vec<Held>,
    calls: Vec<Call>,
    states: Vec<RetryState>,
    leases: Vec<QuotaLease>,
    snap: Snapshot,
    // Harness counters.
    admitted: u64,
    recorded: u64,
    cancelled: u64,
    dropped: u64,
    probes: u64,
    refusals: u64,
    /// State changes seen, by reason (for HOLDOFF_FUZZ_STATS).
    reasons: std::collections::BTreeMap<&'static str, u32>,
}

/// What a step did to the breaker, for the checks that follow it.
#[derive(Default)]
struct Step {
    /// A record of a live probe of the current episode with a success or an answer.
    probe_answer: bool,
    /// A record of anything (stale answers may grow by one).
    recorded: bool,
    /// The effect, when recorded directly on the breaker.
    effect: Option<Effect>,
}

impl World {
    fn now(&self) -> Instant {
        self.clock.peek()
    }

    fn wall_now(&self) -> SystemTime {
        self.clock.wall_at(self.now())
    }

    /// Whether a held permit is a probe that is still alive and of the current episode.
    fn live_current_probe(&self, h: &Held) -> bool {
        matches!(self.snap.state, State::Open | State::HalfOpen)
            && h.permit.is_probe()
            && h.episode == self.snap.episode
            && h.timeout
                .is_some_and(|t| self.now().saturating_since(h.admitted) < t)
    }

    fn take(&mut self, idx: u8) -> Option<Held> {
        if self.held.is_empty() {
            return None;
        }
        let i = usize::from(idx) % self.held.len();
        Some(self.held.swap_remove(i))
    }

    fn admit(&mut self, p: Permit, call: Option<usize>) {
        let before = self.snap;
        assert!(
            !matches!(before.state, State::ForcedOpen),
            "admitted while forced open"
        );
        assert_eq!(
            p.is_probe(),
            matches!(before.state, State::Open | State::HalfOpen),
            "probe flag {} while {:?}",
            p.is_probe(),
            before.state
        );
        if matches!(before.state, State::Open | State::HalfOpen) {
            assert!(
                before.probe_ready,
                "admitted a probe the snapshot said was not ready: {before:?}"
            );
            self.probes += 1;
        }
        let timeout = p.is_probe().then(|| {
            self.cfg
                .probe_timeout
                .unwrap_or(before.interval.expect("open has an interval"))
        });
        self.admitted += 1;
        self.held.push(Held {
            episode: p.episode(),
            permit: p,
            call,
            admitted: self.now(),
            timeout,
        });
    }

    fn refused(&mut self, retry_after: Option<Duration>, state: State) {
        let before = self.snap;
        self.refusals += 1;
        assert_eq!(
            state, before.state,
            "refused in state {state:?}, snapshot said {:?}",
            before.state
        );
        match state {
            State::ForcedOpen => assert_eq!(retry_after, None),
            State::Open | State::HalfOpen => {
                assert!(
                    !before.probe_ready,
                    "refused a probe the snapshot said was ready: {before:?}"
                );
                assert_eq!(retry_after, before.retry_after, "refusal and snapshot disagree");
                let w = retry_after.expect("an open refusal says when");
                assert!(!w.is_zero(), "refused with a zero wait");
                assert!(
                    w <= longest_wait(&self.cfg),
                    "wait {w:?} above {:?}",
                    longest_wait(&self.cfg)
                );
            }
            _ => panic!("refused while {state:?}"),
        }
    }

    /// What is left of the budget for `call` at now (as the policy computes it).
    fn remaining(&self, rs: &RetryState) -> Duration {
        let t = self.now();
        if let Some(start) = self.budget.episode_start() {
            return self
                .bcfg
                .max_rate_limit_duration
                .saturating_sub(t.saturating_since(start));
        }
        match rs.first_failure() {
            Some(first) => self
                .bcfg
                .max_backoff_duration
                .saturating_sub(t.saturating_since(first)),
            None => Duration::ZERO,
        }
    }

    /// Checks a budget or policy decision for `outcome`, made at now.
    fn check_decision(&self, d: &Decision, outcome: Outcome, rs: &RetryState, via_policy: bool) {
        let t = self.now();
        let cap = self.bcfg.retry_after_cap;
        if let Some(start) = self.budget.episode_start() {
            assert!(start <= t, "episode starts in the future");
        }
        match *d {
            Decision::Done => assert_eq!(outcome, Outcome::Success, "done for {outcome:?}"),
            Decision::Retry {
                delay,
                source,
                server_delay,
                capped,
            } => {
                assert!(!delay.is_zero(), "retry with no wait");
                if let Outcome::RetryLater(s) = outcome {
                    if !s.is_zero() {
                        assert_eq!(server_delay, Some(s));
                    }
                }
                if let Some(s) = server_delay {
                    assert!(
                        delay >= s.min(cap),
                        "retry after {delay:?}, shorter than the server's {s:?}"
                    );
                    assert_eq!(capped, s > cap, "capped flag wrong for {s:?} against {cap:?}");
                    assert!(
                        !(capped && self.bcfg.give_up_above_cap),
                        "waited the cap though set to give up above it"
                    );
                }
                match source {
                    WaitSource::RetryAfter => {
                        let s = server_delay.expect("a Retry-After wait has a server delay");
                        assert_eq!(delay, s.min(cap), "Retry-After wait shortened or lengthened");
                        let start = self.budget.episode_start().expect("a rate-limit episode");
                        assert!(
                            t.saturating_since(start) + delay <= self.bcfg.max_rate_limit_duration,
                            "planned wait runs past the episode budget"
                        );
                    }
                    WaitSource::Backoff => {
                        assert!(server_delay.is_none());
                        assert!(rs.retries() <= self.bcfg.max_retries, "retries past max_retries");
                        let first = rs.first_failure().expect("the counted path started");
                        assert!(
                            t.saturating_since(first) + delay <= self.bcfg.max_backoff_duration,
                            "planned backoff runs past the counted budget"
                        );
                        let b = &self.bcfg.backoff;
                        assert!(delay <= b.max.max(b.initial), "backoff {delay:?} above its cap");
                    }
                    WaitSource::Breaker => {
                        assert!(via_policy, "a budget alone never waits for a breaker");
                        assert!(delay <= self.remaining(rs), "breaker wait past the budget");
                    }
                }
            }
            Decision::GiveUp { reason, server_delay } => match reason {
                GiveUpReason::RetryAfterExceedsRemaining => {
                    let s = server_delay.expect("server delay");
                    let start = self.budget.episode_start().expect("episode");
                    let left = self
                        .bcfg
                        .max_rate_limit_duration
                        .saturating_sub(t.saturating_since(start));
                    assert!(s.min(cap) > left, "gave up though {s:?} fits {left:?}");
                }
                GiveUpReason::RetryAfterAboveCap => {
                    assert!(self.bcfg.give_up_above_cap, "above-cap give-up not configured");
                    let s = server_delay.expect("server delay");
                    assert!(s > cap, "gave up above the cap for {s:?} <= {cap:?}");
                }
                GiveUpReason::AttemptsExhausted => {
                    assert!(rs.retries() >= self.bcfg.max_retries)
                }
                GiveUpReason::QuotaEmpty => {
                    let q = self.quota.as_ref().expect("quota_empty without a quota");
                    let cost = if outcome == Outcome::Timeout {
                        q.config().timeout_cost
                    } else {
                        q.config().retry_cost
                    };
                    assert!(
                        q.available() < cost,
                        "quota_empty with {} tokens for {cost}",
                        q.available()
                    );
                }
                GiveUpReason::NotRetryable => assert_eq!(outcome, Outcome::Answer),
                GiveUpReason::Cancelled => assert_eq!(outcome, Outcome::Cancelled),
                GiveUpReason::BreakerOpen => assert!(via_policy),
                GiveUpReason::TotalTimeout => panic!("a total timeout outside an execution"),
                GiveUpReason::BudgetSpent | GiveUpReason::BackoffExceedsRemaining => {}
            },
        }
    }

    fn apply(&mut self, op: &Op) -> Step {
        let mut step = Step::default();
        match op {
            Op::Allow => match self.breaker.allow() {
                Ok(p) => self.admit(p, None),
                Err(r) => self.refused(r.retry_after, r.state),
            },
            Op::Record { idx, out } => {
                if let Some(h) = self.take(*idx) {
                    let o = out.outcome();
                    step.probe_answer =
                        self.live_current_probe(&h) && matches!(o, Outcome::Success | Outcome::Answer);
                    step.recorded = true;
                    let e = self.breaker.record(h.permit, o).expect("own permit");
                    if o == Outcome::Cancelled {
                        assert_eq!(e, Effect::Ignored);
                        self.cancelled += 1;
                    } else {
                        assert_ne!(e, Effect::Ignored, "{o:?} ignored");
                        self.recorded += 1;
                    }
                    step.effect = Some(e);
                }
            }
            Op::Drop { idx } => {
                if self.take(*idx).is_some() {
                    self.dropped += 1;
                }
            }
            Op::Advance(a) => {
                let by = match *a {
                    Adv::Small(ms) => Duration::from_millis(u64::from(ms % 2_000)),
                    Adv::Medium(ms) => Duration::from_millis(u64::from(ms % 400_000)),
                    Adv::Huge => Duration::from_millis(1_000_000_000_000),
                    Adv::ToProbe => self.snap.retry_after.unwrap_or_default(),
                };
                if self.now().as_nanos() / 1_000_000 + (by.as_millis() as u64) < CLOCK_LIMIT_MS {
                    self.clock.advance(by);
                }
            }
            Op::Before { call } => {
                let c = usize::from(*call) % CALLS;
                let attempts = self.calls[c].attempts();
                match self.policy.before_attempt(&mut self.calls[c]) {
                    Before::Go(p) => {
                        assert_eq!(self.calls[c].attempts(), attempts + 1);
                        self.admit(p, Some(c));
                    }
                    Before::Wait(d) => {
                        self.refused(Some(d), self.snap.state);
                        assert!(attempts > 0, "a first attempt waited for the breaker");
                        assert!(
                            d <= self.remaining(self.calls[c].retry_state()),
                            "waits past the budget"
                        );
                    }
                    Before::GiveUp { reason, retry_after } => {
                        assert_eq!(reason, GiveUpReason::BreakerOpen);
                        self.refused(retry_after, self.snap.state);
                    }
                }
            }
            Op::After { idx, out } => {
                if let Some(h) = self.take(*idx) {
                    let c = h.call.unwrap_or(0);
                    let o = out.outcome();
                    step.probe_answer =
                        self.live_current_probe(&h) && matches!(o, Outcome::Success | Outcome::Answer);
                    step.recorded = true;
                    let d = self
                        .policy
                        .after_attempt(&mut self.calls[c], h.permit, o)
                        .expect("own permit");
                    self.count_record(o);
                    self.check_policy_decision(&d, o, c);
                }
            }
            Op::Response { idx, status, hint } => {
                if let Some(h) = self.take(*idx) {
                    let c = h.call.unwrap_or(0);
                    let headers = self.headers(hint);
                    let status = match status % 16 {
                        0 => 200,
                        1 => 404,
                        2 => 403,
                        3 | 4 | 5 => 429,
                        6 | 7 => 503,
                        8 => 500,
                        9 => 0,
                        10 => 600,
                        11 => 1000,
                        _ => *status,
                    };
                    let live = self.live_current_probe(&h);
                    step.recorded = true;
                    let r = self.policy.after_response(
                        &mut self.calls[c],
                        h.permit,
                        i64::from(status),
                        headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                    );
                    match r {
                        Ok((d, cl)) => {
                            assert!(status <= 999);
                            if !(100..=599).contains(&status) {
                                assert_eq!(cl.outcome, Outcome::Failure, "a broken status is a failure");
                            }
                            step.probe_answer =
                                live && matches!(cl.outcome, Outcome::Success | Outcome::Answer);
                            self.count_record(cl.outcome);
                            if let (Outcome::RetryLater(s), holdoff::RetryAfter::Delay(h)) =
                                (cl.outcome, cl.hint)
                            {
                                if !h.is_zero() && cl.source != holdoff::HintSource::None {
                                    assert_eq!(s, h, "the classifier changed the server's delay");
                                }
                            }
                            self.check_policy_decision(&d, cl.outcome, c);
                        }
                        Err(e) => {
                            assert!(status > 999, "{status} refused: {e}");
                            assert_eq!(ErrorKind::of(&e).name(), "invalid_input");
                            self.cancelled += 1;
                        }
                    }
                }
            }
            Op::Decide { call, out } => {
                let c = usize::from(*call) % CALLS;
                let o = out.outcome();
                let d = self.budget.decide(&mut self.states[c], o);
                self.check_decision(&d, o, &self.states[c], false);
            }
            Op::Reset => self.breaker.reset(),
            Op::ForceOpen => self.breaker.force_open(),
            Op::Disable => self.breaker.disable(),
            Op::QuotaAcquire { timeout } => {
                if let Some(q) = &self.quota {
                    let before = q.available();
                    match q.acquire(*timeout) {
                        Ok(l) => {
                            assert_eq!(q.available(), before - l.cost());
                            self.leases.push(l);
                        }
                        Err(e) => {
                            assert!(e.available < e.cost);
                            assert_eq!(q.available(), before);
                        }
                    }
                }
            }
            Op::QuotaSuccess { refund } => {
                if let Some(q) = &self.quota {
                    let before = q.available();
                    let lease = if *refund { self.leases.pop() } else { None };
                    let add = lease.as_ref().map_or(q.config().success_refill, |l| l.cost());
                    q.on_success(lease).expect("this quota's own lease");
                    assert_eq!(q.available(), (before + add).min(q.config().capacity));
                }
            }
            Op::NewCall { call } => self.calls[usize::from(*call) % CALLS] = Call::new(),
        }
        step
    }

    fn count_record(&mut self, o: Outcome) {
        if o == Outcome::Cancelled {
            self.cancelled += 1;
        } else {
            self.recorded += 1;
        }
    }

    fn check_policy_decision(&self, d: &Decision, o: Outcome, c: usize) {
        let rs = self.calls[c].retry_state();
        self.check_decision(d, o, rs, true);
        if let Decision::Retry {
            delay,
            source: WaitSource::Breaker,
            ..
        } = *d
        {
            let wait = self.breaker.snapshot().retry_after.expect("the breaker is open");
            assert_eq!(
                delay, wait,
                "a breaker-sourced delay differs from the breaker's wait"
            );
        }
    }

    fn headers(&self, hint: &Hint) -> Vec<(String, String)> {
        let ra = |v: String| vec![("Retry-After".to_string(), v)];
        match hint {
            Hint::None => Vec::new(),
            Hint::Secs(s) => ra(s.to_string()),
            Hint::Millis(ms) => ra(format!("{}.{:03}", ms / 1000, ms % 1000)),
            Hint::Date(k) => {
                let w = self.wall_now();
                let at = if *k >= 0 {
                    w + Duration::from_secs(u64::from(k.unsigned_abs()))
                } else {
                    w - Duration::from_secs(u64::from(k.unsigned_abs()))
                };
                let secs = at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
                if at < UNIX_EPOCH || secs >= 253_402_300_800 {
                    return Vec::new();
                }
                ra(httpdate::fmt_http_date(at))
            }
            Hint::RateLimitReset(s) => vec![("RateLimit-Reset".to_string(), s.to_string())],
            Hint::Raw(s) => ra(s.chars().take(64).collect()),
        }
    }

    fn check_after(&mut self, op: &Op, step: &Step) {
        let before = self.snap;
        let now = self.now();
        let after = self.breaker.snapshot();
        let events = self.breaker.drain_events();
        let cfg = &self.cfg;

        // State changes: a contiguous chain from the old state to the new one, at this reading.
        let mut state = before.state;
        let mut episode = before.episode;
        let (mut trips, mut recovered) = (0u64, 0u64);
        for ev in &events {
            assert_eq!(
                ev.at, now,
                "event stamped {:?}, step ran at {now:?}: {ev:?}",
                ev.at
            );
            assert_eq!(ev.from, state, "event chain broken: {ev:?} after state {state:?}");
            let bumps = match (ev.from, ev.to, ev.reason) {
                (State::Closed, State::Open, Reason::Tripped | Reason::RetryLater) => {
                    trips += 1;
                    true
                }
                (State::Open, State::HalfOpen, Reason::ProbeAdmitted) => false,
                (State::Open | State::HalfOpen, State::Open, Reason::ProbeFailed | Reason::RetryLater) => {
                    false
                }
                (State::Open | State::HalfOpen, State::Closed, Reason::Recovered) => {
                    recovered += 1;
                    assert!(
                        step.probe_answer,
                        "closed without a live current-episode probe answer: {ev:?}"
                    );
                    assert_eq!(
                        before.recoveries + 1,
                        cfg.recoveries,
                        "closed after {} answers, needs {}",
                        before.recoveries + 1,
                        cfg.recoveries
                    );
                    false
                }
                (_, State::ForcedOpen, Reason::ForcedOpen)
                | (_, State::Disabled, Reason::Disabled)
                | (_, State::Closed, Reason::Reset) => true,
                _ => panic!("state change along a forbidden edge: {ev:?}"),
            };
            let want = if bumps { episode.wrapping_add(1) } else { episode };
            assert_eq!(ev.episode, want, "episode of {ev:?}");
            episode = want;
            match ev.reason {
                Reason::Tripped | Reason::ProbeFailed => {
                    let d = ev.open_for.expect("an opening says for how long");
                    let b = &cfg.open_interval;
                    assert!(
                        !d.is_zero() && d <= b.max.max(b.initial),
                        "open for {d:?}: {ev:?}"
                    );
                    assert_eq!(ev.requested_delay, None);
                }
                Reason::RetryLater => {
                    let r = ev.requested_delay.expect("the provider's delay");
                    assert_eq!(ev.open_for, Some(r.min(cfg.max_retry_later)), "{ev:?}");
                }
                _ => {}
            }
            state = ev.to;
            *self.reasons.entry(ev.reason.name()).or_default() += 1;
        }
        assert_eq!(after.state, state, "state changed without an event");
        assert_eq!(after.episode, episode, "episode changed without an event");
        assert_eq!(after.events_dropped, 0);
        assert_eq!(after.opens, before.opens + trips, "opens counter");
        assert_eq!(after.closes, before.closes + recovered, "closes counter");

        // Probes and recovery.
        assert!(after.probes_in_flight <= cfg.max_probes_in_flight, "{after:?}");
        assert!(after.recoveries < cfg.recoveries, "{after:?}");
        if after.recoveries > before.recoveries {
            assert_eq!(after.recoveries, before.recoveries + 1, "recovery jumped: {op:?}");
            assert!(
                step.probe_answer,
                "recovery grew without a live probe answer: {op:?}"
            );
        }
        match after.state {
            State::Open | State::HalfOpen => {
                let w = after.retry_after.expect("open has a retry_after");
                assert_eq!(after.probe_ready, w.is_zero());
                assert!(w <= longest_wait(cfg), "wait {w:?} above {:?}", longest_wait(cfg));
                let i = after.interval.expect("open has an interval");
                assert!(
                    i <= longest_wait(cfg).max(cfg.open_interval.initial),
                    "interval {i:?}"
                );
            }
            _ => {
                assert_eq!(after.retry_after, None);
                assert!(!after.probe_ready);
                assert_eq!(after.probes_in_flight, 0);
            }
        }

        // Counters.
        assert_eq!(after.probes, self.probes, "probe counter");
        assert_eq!(after.refusals, self.refusals, "refusal counter");
        let stale = after.stale_answers - before.stale_answers;
        assert!(
            stale <= u64::from(step.recorded),
            "stale answers grew by {stale} on {op:?}"
        );
        if let Some(e) = step.effect {
            assert_eq!(
                e == Effect::Stale,
                stale == 1,
                "effect {e:?} but stale grew by {stale}"
            );
        }
        assert_eq!(
            self.admitted,
            self.recorded + self.cancelled + self.dropped + self.held.len() as u64,
            "admitted = recorded + cancelled + dropped + held"
        );
        if let (Some(q), Some(qc)) = (&self.quota, &self.qcfg) {
            assert!(q.available() <= qc.capacity);
        }
        self.snap = after;
    }

    /// Once the upstream is healthy the breaker closes within `recoveries` probe intervals.
    fn recovers(&mut self) {
        self.held.clear();
        if self.now().as_nanos() / 1_000_000 + 10 * longest_wait(&self.cfg).as_millis() as u64
            >= CLOCK_LIMIT_MS
        {
            return;
        }
        let limit = longest_wait(&self.cfg);
        for _ in 0..self.cfg.recoveries + 1 {
            match self.breaker.snapshot().state {
                State::Closed | State::Disabled | State::ForcedOpen => break,
                _ => {}
            }
            self.clock.advance(limit);
            let p = self.breaker.allow();
            assert!(
                p.is_ok(),
                "no probe admitted a full {limit:?} later: {:?}",
                self.breaker.snapshot()
            );
            self.breaker.record(p.unwrap(), Outcome::Success).unwrap();
        }
        let s = self.breaker.snapshot().state;
        assert!(
            matches!(s, State::Closed | State::Disabled | State::ForcedOpen),
            "still {s:?} after {} healthy probes",
            self.cfg.recoveries + 1
        );
    }
}

fuzz_target!(|input: Input| {
    let cfg = breaker_config(&input.cfg);
    let bcfg = budget_config(&input.cfg);
    let qcfg = quota_config(&input.cfg);
    let clock = ManualClock::with_wall_origin(UNIX_EPOCH + Duration::from_secs(WALL_ORIGIN_S));
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let breaker = Arc::new(Breaker::new(cfg.clone(), Arc::clone(&shared)).expect("valid breaker config"));
    let budget = Arc::new(RetryBudget::new(bcfg.clone(), Arc::clone(&shared)).expect("valid budget config"));
    let quota = qcfg.map(|q| Arc::new(RetryQuota::new(q).expect("valid quota config")));
    let classifier = Classifier::new(ClassifierConfig {
        failure_statuses: if input.cfg.blocked_403 {
            vec![403]
        } else {
            Vec::new()
        },
        rate_limit_default_wait: input
            .cfg
            .rate_limit_wait_ms
            .map(|ms| Duration::from_millis(u64::from(ms) + 1)),
        ..ClassifierConfig::default()
    })
    .expect("valid classifier");
    let policy = Policy::new(
        Arc::clone(&breaker),
        Arc::clone(&budget),
        quota.clone(),
        classifier,
    )
    .unwrap();
    let snap = breaker.snapshot();
    let mut w = World {
        clock,
        cfg,
        bcfg,
        qcfg,
        breaker,
        budget,
        quota,
        policy,
        held: Vec::new(),
        calls: (0..CALLS).map(|_| Call::new()).collect(),
        states: (0..CALLS).map(|_| RetryState::new()).collect(),
        leases: Vec::new(),
        snap,
        admitted: 0,
        recorded: 0,
        cancelled: 0,
        dropped: 0,
        probes: 0,
        refusals: 0,
        reasons: Default::default(),
    };
    for op in input.ops.iter().take(512) {
        let step = w.apply(op);
        w.check_after(op, &step);
    }
    if stats() {
        // HOLDOFF_FUZZ_STATS=1 (with -runs=0 over a corpus): what the inputs reach.
        eprintln!(
            "stats ops={} probes={} refusals={} {:?}",
            input.ops.len(),
            w.probes,
            w.refusals,
            w.reasons
        );
    }
    w.recovers();
});

fn stats() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("HOLDOFF_FUZZ_STATS").is_some())
}
