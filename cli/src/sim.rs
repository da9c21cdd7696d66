//! The discrete-event simulation: callers, the holdoff core, and the upstream on one virtual
//! clock.
//!
//! Events are processed in time order; at equal times, scheduled events (answers, retries) go
//! before new arrivals, in the order they were scheduled. An answer with zero latency is handled
//! at once, before anything else at that instant. The core's [`ManualClock`] is set to each
//! event's time before the core is asked anything, so the core sees exactly the virtual time.
//! Nothing sleeps.
//!
//! Each logical call:
//! * **With a budget** in the configuration, it runs through a [`Policy`] (breaker + budget +
//!   quota + classifier): `before_attempt` admits, makes it wait for the breaker, or gives up;
//!   `after_response` classifies the answer and says done, retry after a delay, or give up. When
//!   the configuration has no breaker, the policy's breaker is disabled (it admits everything).
//! * **Without a budget**, a call is one attempt: the breaker admits or refuses it; an admitted
//!   call's answer is classified and recorded. No retries (incidents 1 and 2).
//!
//! With `workers = N`, each worker has its own breaker, budget, quota and policy, and call `k`
//! goes to worker `(k - 1) mod N` (a round-robin balancer). With a `fleet` in the configuration
//! the workers' breakers share one record ([`crate::fleet`]): each worker syncs every
//! `refresh_ms` of virtual time (first at `i * refresh_ms / N`, so the workers' timers are
//! spread) and at once after its breaker pushes an op. Fleet syncs do not keep the run going:
//! it ends when no call is left.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use holdoff::interop::{Coded, OutcomeKind};
use holdoff::{
    Before, Breaker, BreakerConfig, Call, Classifier, Decision, GiveUpReason, Instant, ManualClock, Outcome,
    Permit, Policy, Reason, RetryBudget, RetryQuota, State, StateChange,
};
use serde::Serialize;

use crate::arrivals::Arrivals;
use crate::chart::{Class, Collector, Row};
use crate::error::CliError;
use crate::fleet::Link;
use crate::metrics::Sampler;
use crate::scenario::{Answer, Scenario};
use crate::trace::TraceReader;
use crate::upstream::Upstream;

/// Milliseconds for output: an integer when whole, else a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ms(pub u64);

impl Ms {
    /// Milliseconds as a float.
    pub fn ms(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl Serialize for Ms {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0 % 1_000_000 == 0 {
            s.serialize_u64(self.0 / 1_000_000)
        } else {
            s.serialize_f64(self.ms())
        }
    }
}

/// Upstream requests by how they ended.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Outcomes {
    /// 1xx-3xx.
    pub success: u64,
    /// Reachable but not a success, not retryable (a 404).
    pub answer: u64,
    /// Transient failures.
    pub failure: u64,
    /// Rate-limited with a usable delay.
    pub retry_later: u64,
    /// Abandoned by the caller's timeout.
    pub timeout: u64,
}

/// The figures of one run. Times are virtual milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// The file the configuration came from.
    pub config: String,
    /// Virtual time of the last event processed.
    pub end_ms: Ms,
    /// Logical calls that arrived.
    pub calls: u64,
    /// Requests that reached the upstream (first attempts, retries and probes).
    pub upstream_requests: u64,
    /// Those requests by outcome.
    pub upstream_outcomes: Outcomes,
    /// Admissions the breaker refused.
    pub refused: u64,
    /// Times the breaker opened from closed.
    pub opens: u64,
    /// Times it closed by recovering.
    pub closes: u64,
    /// Closes followed by a re-open within one probe interval (the interval in force at the
    /// close).
    pub premature_closes: u64,
    /// Probes admitted while open.
    pub probes: u64,
    /// Logical calls that stopped without an answer (every reason except a final answer).
    pub give_ups: u64,
    /// Give-ups by reason (`breaker_open`, `budget_spent`, ...).
    pub give_ups_by_reason: BTreeMap<String, u64>,
    /// Give-ups on a rate-limited answer (the decision carried the server's delay).
    pub rate_limit_give_ups: u64,
    /// Those by reason.
    pub rate_limit_give_ups_by_reason: BTreeMap<String, u64>,
    /// Calls that ended in a success.
    pub calls_succeeded: u64,
    /// Calls that ended in a final non-success answer (a 404).
    pub calls_answered: u64,
    /// Single-attempt calls (no budget configured) whose one attempt failed.
    pub calls_failed: u64,
    /// Retries scheduled (waits started, including waits for the breaker).
    pub retries: u64,
    /// Total time of those waits.
    pub wait_ms_total: Ms,
    /// Calls that queued for a free caller (concurrency limit).
    pub queued: u64,
    /// When the upstream last started answering again after failing.
    pub upstream_recovered_at_ms: Option<Ms>,
    /// From that recovery to the breaker's next close (0 if it was closed then; null if it
    /// never closed after it).
    pub recovery_to_close_ms: Option<Ms>,
    /// Most upstream requests a premature close let through (between the close and the re-open
    /// within one probe interval); 0 when no close was premature.
    pub largest_burst_after_close: u64,
    /// Rate-limit episodes of the budget.
    pub rate_limit_episodes: u64,
    /// The configured rate-limit budget per episode.
    pub budget_ms: Option<Ms>,
    /// The most of it one episode used (time from its first rate-limited answer to its last
    /// decision).
    pub budget_spent_ms: Option<Ms>,
    /// Lowest retry-quota balance seen (tokens), with a quota configured.
    pub quota_low_water: Option<u64>,
    /// Answers that arrived for an earlier episode and moved nothing.
    pub stale_answers: u64,
    /// Calls still in progress or queued when the run ended (`end_ms`).
    pub in_flight_at_end: u64,
    /// Trace lines skipped as malformed (`--skip-malformed`).
    pub malformed_lines_skipped: u64,
    /// Simulated workers (the scenario's `workers`, default 1).
    pub workers: u64,
    /// `shared` when the configuration has a `fleet` (one shared record for every worker),
    /// `local` otherwise (each worker its own breaker).
    pub fleet: &'static str,
    /// Requests that reached the upstream while a Retry-After was known to the fleet and still
    /// running: sent at or after the answer carrying it plus the staleness bound (the fleet's
    /// `refresh_ms`; 50 ms, the core's default, without a fleet) and before its end.
    pub requests_before_retry_after: u64,
    /// Each worker's share.
    pub per_worker: Vec<WorkerSummary>,
}

/// One worker's figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct WorkerSummary {
    /// Index, from 0.
    pub worker: u64,
    /// Logical calls it received.
    pub calls: u64,
    /// Requests it sent that reached the upstream.
    pub upstream_requests: u64,
    /// Probes its breaker admitted.
    pub probes: u64,
    /// Its requests sent before a known Retry-After (see the summary's key).
    pub requests_before_retry_after: u64,
    /// Admissions its breaker refused.
    pub refused: u64,
    /// Times its breaker opened from closed.
    pub opens: u64,
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The breaker changed state.
    State {
        /// When, ns.
        t: u64,
        /// The worker, when there are several.
        worker: Option<u32>,
        /// Before.
        from: State,
        /// After.
        to: State,
        /// Why.
        reason: Reason,
        /// Episode after the change.
        episode: u32,
        /// For openings: time to the next probe, ns.
        open_for: Option<u64>,
    },
    /// A probe was admitted.
    Probe {
        /// When, ns.
        t: u64,
        /// The call.
        call: u64,
        /// The worker, when there are several.
        worker: Option<u32>,
    },
    /// A probe's answer.
    ProbeAnswer {
        /// When, ns.
        t: u64,
        /// The call.
        call: u64,
        /// Status, or none for a timeout.
        status: Option<u16>,
        /// Outcome name.
        outcome: &'static str,
    },
    /// The breaker refused a call.
    Refused {
        /// When, ns.
        t: u64,
        /// The call.
        call: u64,
        /// Time to the next probe, ns.
        retry_after: Option<u64>,
        /// What the call did then.
        then: Then,
    },
    /// A call waits before its next attempt.
    Wait {
        /// When, ns.
        t: u64,
        /// The call.
        call: u64,
        /// How long, ns.
        delay: u64,
        /// `retry_after`, `backoff` or `breaker`.
        source: &'static str,
        /// The status that caused it (none for a breaker wait).
        status: Option<u16>,
    },
    /// A call gave up.
    GiveUp {
        /// When, ns.
        t: u64,
        /// The call.
        call: u64,
        /// Why.
        reason: &'static str,
        /// Attempts that reached the upstream.
        attempts: u32,
    },
    /// A request that was not a probe got its answer (folded into runs in the timeline).
    Sent {
        /// When the answer came, ns.
        t: u64,
        /// The call.
        call: u64,
        /// Outcome name (`success`, `answer`, `failure`, `retry_later`, `timeout`).
        outcome: &'static str,
    },
    /// The upstream started answering again.
    Recovered {
        /// When, ns.
        t: u64,
    },
}

/// What a refused call did next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Nothing more (a single-attempt call without a budget).
    Stopped,
    /// Gave up (`breaker_open`: the breaker stays closed to it beyond its budget).
    GaveUp,
    /// Waits for the breaker, then asks again.
    Waits,
}

/// Receives the timeline as it happens (streamed; nothing is kept).
pub trait Sink {
    /// One event.
    fn event(&mut self, ev: Event) -> Result<(), CliError>;
}

/// Run options.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Skip malformed trace lines (with a warning) instead of stopping.
    pub skip_malformed: bool,
    /// Collect chart data.
    pub chart: bool,
}

/// The result of a run.
pub struct Run {
    /// The figures.
    pub summary: Summary,
    /// Chart data, when asked for.
    pub chart: Option<Collector>,
}

struct CallState {
    id: u64,
    worker: usize,
    call: Call,
    attempts: u32,
    own: Option<Answer>,
}

struct AnswerJob {
    cs: CallState,
    permit: Permit,
    answer: Answer,
    timed_out: bool,
    sent: u64,
}

// Boxed so that heap items stay small: a breaker wait can park many calls at once.
enum Job {
    Attempt(Box<CallState>),
    Answer(Box<AnswerJob>),
    /// A worker's fleet sync; `periodic` ones schedule the next.
    Sync {
        worker: usize,
        periodic: bool,
    },
}

struct Item {
    t: u64,
    seq: u64,
    job: Job,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        // BinaryHeap is a max-heap: reverse for earliest first.
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

fn state_row(s: State) -> Row {
    match s {
        State::Closed | State::Disabled => Row::Closed,
        State::HalfOpen => Row::HalfOpen,
        State::Open | State::ForcedOpen => Row::Open,
    }
}

fn internal(e: impl std::fmt::Display) -> CliError {
    CliError::msg(format!("internal error: {e}"))
}

/// One simulated worker: its own breaker, budget, quota and policy, its callers, and (with a
/// shared fleet) its link to the store.
struct Worker {
    breaker: Arc<Breaker>,
    policy: Option<Policy>,
    budget: Option<Arc<RetryBudget>>,
    quota: Option<Arc<RetryQuota>>,
    events: Arc<Mutex<Vec<StateChange>>>,
    events_flag: Arc<AtomicBool>,
    link: Option<Link>,
    active: u64,
    queue: VecDeque<(u64, Option<Answer>)>,
    state: State,
    interval: u64,
    last_close: Option<(u64, u64)>,
    burst_live: bool,
    burst: u64,
    pending_recovery: Option<u64>,
    recovery_to_close: Option<Ms>,
    rl_start: Option<Instant>,
    tally: WorkerSummary,
}

/// The parts every worker shares: the virtual clock, the classifier, the fleet's store.
struct Shared<'a> {
    clock: Arc<dyn holdoff::Clock>,
    classifier: &'a Classifier,
    has_breaker: bool,
    fleet: Option<&'a crate::fleet::Fleet>,
    woken: &'a Arc<Mutex<Vec<usize>>>,
}

fn build_worker(scn: &Scenario, sh: &Shared<'_>, index: usize) -> Result<Worker, CliError> {
    let at = |e: holdoff::ConfigError| {
        CliError::in_file(&scn.config_origin, e.rule).field(format!("config.{}", e.field))
    };
    let cfg = &scn.config;
    let bcfg = match &cfg.breaker {
        Some(b) => b.to_config().map_err(at)?,
        None => BreakerConfig::default(),
    };
    let breaker = Arc::new(Breaker::new(bcfg, Arc::clone(&sh.clock)).map_err(at)?);
    if !sh.has_breaker {
        breaker.disable();
        breaker.drain_events();
    }
    let quota = match &cfg.quota {
        Some(q) => Some(Arc::new(RetryQuota::new(q.to_config().map_err(at)?).map_err(at)?)),
        None => None,
    };
    let budget = match &cfg.budget {
        Some(b) => Some(Arc::new(
            RetryBudget::new(b.to_config().map_err(at)?, Arc::clone(&sh.clock)).map_err(at)?,
        )),
        None => None,
    };
    let policy = match &budget {
        Some(b) => Some(
            Policy::new(
                Arc::clone(&breaker),
                Arc::clone(b),
                quota.clone(),
                sh.classifier.clone(),
            )
            .map_err(at)?,
        ),
        None => None,
    };
    let events = Arc::new(Mutex::new(Vec::new()));
    let events_flag = Arc::new(AtomicBool::new(false));
    {
        let (q, f) = (Arc::clone(&events), Arc::clone(&events_flag));
        breaker.set_listener(Some(Arc::new(move |ev: &StateChange| {
            q.lock().unwrap_or_else(|e| e.into_inner()).push(*ev);
            f.store(true, Ordering::Release);
        })));
    }
    let link = match sh.fleet {
        Some(f) => Some(f.attach(&breaker, index, Arc::clone(sh.woken), &scn.config_origin)?),
        None => None,
    };
    let interval = breaker.config().open_interval.initial.as_nanos() as u64;
    Ok(Worker {
        breaker,
        policy,
        budget,
        quota,
        events,
        events_flag,
        link,
        active: 0,
        queue: VecDeque::new(),
        state: if sh.has_breaker {
            State::Closed
        } else {
            State::Disabled
        },
        interval,
        last_close: None,
        burst_live: false,
        burst: 0,
        pending_recovery: None,
        recovery_to_close: None,
        rl_start: None,
        tally: WorkerSummary {
            worker: index as u64,
            ..WorkerSummary::default()
        },
    })
}

struct Engine<'s> {
    clock: ManualClock,
    workers: Vec<Worker>,
    /// Whether timeline lines name their worker (more than one).
    named: bool,
    has_breaker: bool,
    classifier: Classifier,
    upstream: Upstream,
    heap: BinaryHeap<Item>,
    seq: u64,
    /// Attempts and answers in the heap (fleet syncs alone do not keep the run going).
    calls_pending: u64,
    concurrency: Option<u64>,
    timeout: Option<u64>,
    woken: Arc<Mutex<Vec<usize>>>,
    retry_after: KnownRetryAfter,
    sink: Option<&'s mut dyn Sink>,
    chart: Option<Collector>,
    s: Summary,
    next_id: u64,
}

/// Runs a scenario.
pub fn run(scn: &Scenario, opts: Options, sink: Option<&mut dyn Sink>) -> Result<Run, CliError> {
    run_sampled(scn, opts, sink, None)
}

/// The objects whose metrics the sampler reads, worker by worker.
fn metric_objects(workers: &[Worker]) -> Vec<crate::metrics::Objects<'_>> {
    workers
        .iter()
        .map(|w| crate::metrics::Objects {
            breaker: &w.breaker,
            policy: w.policy.as_ref(),
            quota: w.quota.as_deref(),
        })
        .collect()
}

/// Runs a scenario, and with `metrics` reads every worker's metrics when it is built, over
/// virtual time and at the end, into the sampler's file ([`crate::metrics`]).
pub fn run_sampled(
    scn: &Scenario,
    opts: Options,
    sink: Option<&mut dyn Sink>,
    mut metrics: Option<&mut Sampler>,
) -> Result<Run, CliError> {
    let wall = wall_origin(scn, opts.skip_malformed)?;
    let clock = ManualClock::with_wall_origin(wall);
    let shared: Arc<dyn holdoff::Clock> = Arc::new(clock.clone());
    let at = |e: holdoff::ConfigError| {
        CliError::in_file(&scn.config_origin, e.rule).field(format!("config.{}", e.field))
    };
    let cfg = &scn.config;
    let has_breaker = cfg.breaker.is_some();
    let classifier = Classifier::new(
        cfg.classifier
            .clone()
            .unwrap_or_default()
            .to_config()
            .map_err(at)?,
    )
    .map_err(at)?;
    let fleet = crate::fleet::Fleet::from_config(scn)?;
    let woken = Arc::new(Mutex::new(Vec::new()));
    let sh = Shared {
        clock: shared,
        classifier: &classifier,
        has_breaker,
        fleet: fleet.as_ref(),
        woken: &woken,
    };
    let mut workers = Vec::with_capacity(scn.workers as usize);
    for i in 0..scn.workers as usize {
        workers.push(build_worker(scn, &sh, i)?);
    }
    if let Some(m) = metrics.as_deref_mut() {
        // The first read starts the objects' counting, as an exporter's does when it attaches.
        m.begin(&metric_objects(&workers));
    }
    let upstream = Upstream::new(scn, classifier.clone(), wall, opts.skip_malformed)?;
    let mut arrivals = Arrivals::new(scn, opts.skip_malformed)?;

    let mut e = Engine {
        clock,
        named: workers.len() > 1,
        workers,
        has_breaker,
        classifier,
        upstream,
        heap: BinaryHeap::new(),
        seq: 0,
        calls_pending: 0,
        concurrency: scn.concurrency,
        timeout: scn.timeout,
        woken,
        retry_after: KnownRetryAfter::new(crate::fleet::staleness_bound(scn)),
        sink,
        chart: opts.chart.then(|| Collector::new(has_breaker)),
        s: Summary {
            scenario: scn.name.clone(),
            config: scn.config_origin.display().to_string(),
            workers: u64::from(scn.workers),
            fleet: if fleet.is_some() { "shared" } else { "local" },
            ..Summary::default()
        },
        next_id: 1,
    };
    if let Some(b) = &e.workers[0].budget {
        e.s.budget_ms = Some(Ms(b.config().max_rate_limit_duration.as_nanos() as u64));
    }
    if let Some(q) = &e.workers[0].quota {
        e.s.quota_low_water = Some(q.available());
    }
    // The workers' periodic syncs are spread over one refresh period, as independent processes'
    // timers would be.
    if let Some(f) = &fleet {
        let n = e.workers.len() as u64;
        for w in 0..e.workers.len() {
            if e.workers[w].link.is_some() {
                let first = f.refresh_ns() * w as u64 / n;
                e.schedule(
                    first,
                    Job::Sync {
                        worker: w,
                        periodic: true,
                    },
                );
            }
        }
    }

    let shared_fleet = fleet.is_some();
    let end = scn.end.unwrap_or(u64::MAX);
    let mut now = 0u64;
    loop {
        let next_arrival = arrivals.peek();
        if next_arrival.is_none() && e.calls_pending == 0 {
            break;
        }
        let next_job = e.heap.peek().map(|i| i.t);
        let take_job = match (next_job, next_arrival) {
            (None, None) => break,
            (Some(j), Some(a)) => j <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        let t = if take_job {
            next_job.unwrap_or(0)
        } else {
            next_arrival.unwrap_or(0)
        };
        if t > end {
            break;
        }
        if let Some(m) = metrics.as_deref_mut() {
            if m.due(t) {
                m.catch_up(t, &metric_objects(&e.workers))?;
            } else {
                m.touch();
            }
        }
        now = t;
        e.clock.set(Instant::from_nanos(t)).map_err(internal)?;
        // Time passes for the upstream too, so a recovery shows at its own time.
        e.upstream.advance_to(t)?;
        if let Some(r) = e.upstream.take_recovery() {
            e.on_recovery(r)?;
        }
        if take_job {
            let Some(item) = e.heap.pop() else { break };
            match item.job {
                Job::Attempt(cs) => {
                    e.calls_pending -= 1;
                    e.attempt(t, *cs)?
                }
                Job::Answer(a) => {
                    e.calls_pending -= 1;
                    let a = *a;
                    e.on_answer(t, a.cs, a.permit, a.answer, a.timed_out, a.sent)?
                }
                Job::Sync { worker, periodic } => e.sync(t, worker, periodic)?,
            }
        } else if let Some((t, rec)) = arrivals.pop()? {
            let own = rec.map(|r| {
                e.upstream.feed(&r);
                r.answer
            });
            e.s.calls += 1;
            let id = e.next_id;
            e.next_id += 1;
            // Calls go to the workers in turn, like a round-robin load balancer.
            let w = ((id - 1) % e.workers.len() as u64) as usize;
            e.workers[w].tally.calls += 1;
            e.start(t, w, id, own)?;
        }
        if shared_fleet {
            e.wake(t)?;
        }
    }
    if let Some(end) = scn.end {
        now = end;
    }
    if let Some(m) = metrics {
        m.finish(now, &metric_objects(&e.workers))?;
    }
    let skipped = arrivals.skipped();
    e.finish(now, skipped)
}

fn wall_origin(scn: &Scenario, skip: bool) -> Result<SystemTime, CliError> {
    if let Some(w) = scn.wall_origin {
        return Ok(w);
    }
    if let Some(t) = &scn.trace {
        if let Some(o) = &t.origin {
            return Ok(crate::scenario::to_system_time(o));
        }
        let mut rdr = TraceReader::open(t, skip, false)?;
        rdr.next_record()?;
        if let Some(o) = rdr.origin() {
            return Ok(crate::scenario::to_system_time(&o));
        }
    }
    Ok(UNIX_EPOCH)
}

/// The Retry-After windows the fleet knows of, for counting requests sent inside one.
///
/// A Retry-After of `d` answered at `t` is known from `t + staleness` (the time every worker
/// of a shared fleet has synced since) until `t + d`. Answers come in time order, so windows
/// become known in order: a queue of those not yet known and the latest end of those known.
struct KnownRetryAfter {
    staleness: u64,
    pending: VecDeque<(u64, u64)>,
    known_until: u64,
}

impl KnownRetryAfter {
    fn new(staleness: u64) -> Self {
        KnownRetryAfter {
            staleness,
            pending: VecDeque::new(),
            known_until: 0,
        }
    }

    /// A Retry-After of `d` ns reached a worker at `t`.
    fn told(&mut self, t: u64, d: u64) {
        let (from, until) = (t.saturating_add(self.staleness), t.saturating_add(d));
        if from < until {
            self.pending.push_back((from, until));
        }
    }

    /// Whether a request sent at `t` is inside a known Retry-After.
    fn inside(&mut self, t: u64) -> bool {
        while let Some(&(from, until)) = self.pending.front() {
            if from > t {
                break;
            }
            self.known_until = self.known_until.max(until);
            self.pending.pop_front();
        }
        t < self.known_until
    }
}

impl Engine<'_> {
    fn emit(&mut self, ev: Event) -> Result<(), CliError> {
        match &mut self.sink {
            Some(s) => s.event(ev),
            None => Ok(()),
        }
    }

    fn schedule(&mut self, t: u64, job: Job) {
        if !matches!(job, Job::Sync { .. }) {
            self.calls_pending += 1;
        }
        self.seq += 1;
        self.heap.push(Item {
            t,
            seq: self.seq,
            job,
        });
    }

    /// One fleet sync of worker `w`: its ops to the store, the fleet's record to its breaker.
    fn sync(&mut self, t: u64, w: usize, periodic: bool) -> Result<(), CliError> {
        let Some(link) = &mut self.workers[w].link else {
            return Ok(());
        };
        link.sync();
        let next = periodic.then(|| t.saturating_add(link.refresh_ns()));
        self.drain(w)?;
        if let Some(n) = next {
            self.schedule(
                n,
                Job::Sync {
                    worker: w,
                    periodic: true,
                },
            );
        }
        Ok(())
    }

    /// Syncs at once every worker whose breaker pushed an op to its fleet (a trip, a
    /// retry-later, a probe answer): the waker of a real worker's background thread.
    fn wake(&mut self, t: u64) -> Result<(), CliError> {
        loop {
            let ws = std::mem::take(&mut *self.woken.lock().unwrap_or_else(|e| e.into_inner()));
            if ws.is_empty() {
                return Ok(());
            }
            let mut ws = ws;
            ws.sort_unstable();
            ws.dedup();
            for w in ws {
                self.sync(t, w, false)?;
            }
        }
    }

    fn start(&mut self, t: u64, w: usize, id: u64, own: Option<Answer>) -> Result<(), CliError> {
        if let Some(limit) = self.concurrency {
            let wk = &mut self.workers[w];
            if wk.active >= limit {
                self.s.queued += 1;
                wk.queue.push_back((id, own));
                return Ok(());
            }
        }
        self.begin(t, w, id, own)
    }

    /// Takes a concurrency slot of worker `w` for call `id` and makes its first attempt.
    fn begin(&mut self, t: u64, w: usize, id: u64, own: Option<Answer>) -> Result<(), CliError> {
        self.workers[w].active += 1;
        let cs = CallState {
            id,
            worker: w,
            call: Call::new(),
            attempts: 0,
            own,
        };
        self.attempt(t, cs)
    }

    fn end_call(&mut self, t: u64, w: usize) -> Result<(), CliError> {
        let wk = &mut self.workers[w];
        wk.active -= 1;
        if let Some((id, own)) = wk.queue.pop_front() {
            self.begin(t, w, id, own)?;
        }
        Ok(())
    }

    fn refused(
        &mut self,
        t: u64,
        cs: &CallState,
        retry_after: Option<u64>,
        then: Then,
    ) -> Result<(), CliError> {
        self.s.refused += 1;
        self.workers[cs.worker].tally.refused += 1;
        if let Some(c) = &mut self.chart {
            c.refused(t);
        }
        if self.sink.is_some() {
            self.emit(Event::Refused {
                t,
                call: cs.id,
                retry_after,
                then,
            })?;
        }
        Ok(())
    }

    /// Counts a give-up; `emit` is false when the refusal line already says so.
    fn give_up(
        &mut self,
        t: u64,
        cs: &CallState,
        reason: GiveUpReason,
        rate_limited: bool,
        emit: bool,
    ) -> Result<(), CliError> {
        if reason == GiveUpReason::NotRetryable {
            self.s.calls_answered += 1;
            return Ok(());
        }
        self.s.give_ups += 1;
        *self
            .s
            .give_ups_by_reason
            .entry(reason.name().to_string())
            .or_default() += 1;
        if rate_limited {
            self.s.rate_limit_give_ups += 1;
            *self
                .s
                .rate_limit_give_ups_by_reason
                .entry(reason.name().to_string())
                .or_default() += 1;
        }
        if let Some(c) = &mut self.chart {
            c.gave_up(t);
        }
        if !emit {
            return Ok(());
        }
        self.emit(Event::GiveUp {
            t,
            call: cs.id,
            reason: reason.name(),
            attempts: cs.attempts,
        })
    }

    fn attempt(&mut self, t: u64, mut cs: CallState) -> Result<(), CliError> {
        let w = cs.worker;
        if let Some(p) = &self.workers[w].policy {
            match p.before_attempt(&mut cs.call) {
                Before::Go(permit) => self.send(t, cs, permit),
                Before::Wait(d) => {
                    self.drain(w)?;
                    let d = d.as_nanos() as u64;
                    self.refused(t, &cs, Some(d), Then::Waits)?;
                    self.wait(t, cs, d, "breaker", None, false)
                }
                Before::GiveUp { reason, retry_after } => {
                    self.drain(w)?;
                    self.refused(t, &cs, retry_after.map(|d| d.as_nanos() as u64), Then::GaveUp)?;
                    self.give_up(t, &cs, reason, false, false)?;
                    self.end_call(t, w)
                }
            }
        } else {
            match self.workers[w].breaker.allow() {
                Ok(permit) => self.send(t, cs, permit),
                Err(r) => {
                    self.drain(w)?;
                    self.refused(t, &cs, r.retry_after.map(|d| d.as_nanos() as u64), Then::Stopped)?;
                    self.end_call(t, w)
                }
            }
        }
    }

    fn wait(
        &mut self,
        t: u64,
        cs: CallState,
        d: u64,
        source: &'static str,
        status: Option<u16>,
        emit: bool,
    ) -> Result<(), CliError> {
        self.s.retries += 1;
        self.s.wait_ms_total.0 = self.s.wait_ms_total.0.saturating_add(d);
        if let Some(c) = &mut self.chart {
            c.wait(t);
        }
        if emit && self.sink.is_some() {
            self.emit(Event::Wait {
                t,
                call: cs.id,
                delay: d,
                source,
                status,
            })?;
        }
        self.schedule(t.saturating_add(d), Job::Attempt(Box::new(cs)));
        Ok(())
    }

    fn send(&mut self, t: u64, mut cs: CallState, permit: Permit) -> Result<(), CliError> {
        let w = cs.worker;
        cs.attempts += 1;
        self.s.upstream_requests += 1;
        self.workers[w].tally.upstream_requests += 1;
        if self.retry_after.inside(t) {
            self.s.requests_before_retry_after += 1;
            self.workers[w].tally.requests_before_retry_after += 1;
        }
        if permit.is_probe() {
            if let Some(c) = &mut self.chart {
                c.probe(t);
            }
            let worker = self.named.then_some(w as u32);
            self.emit(Event::Probe {
                t,
                call: cs.id,
                worker,
            })?;
        }
        self.drain(w)?;
        let wk = &mut self.workers[w];
        if !permit.is_probe() && wk.burst_live {
            match wk.last_close {
                Some((tc, iv)) if t.saturating_sub(tc) <= iv => wk.burst += 1,
                _ => wk.burst_live = false,
            }
        }
        let own = if cs.attempts == 1 { cs.own.take() } else { None };
        let answer = self.upstream.answer(t, own)?;
        if let Some(r) = self.upstream.take_recovery() {
            self.on_recovery(r)?;
        }
        // A timed-out attempt ends at the timeout, an answered one after its latency.
        let (after, timed_out) = match self.timeout {
            Some(to) if answer.latency >= to => (to, true),
            _ if answer.latency == 0 => return self.on_answer(t, cs, permit, answer, false, t),
            _ => (answer.latency, false),
        };
        let job = AnswerJob {
            cs,
            permit,
            answer,
            timed_out,
            sent: t,
        };
        self.schedule(t.saturating_add(after), Job::Answer(Box::new(job)));
        Ok(())
    }

    fn answered(
        &mut self,
        t: u64,
        call: u64,
        probe: bool,
        status: Option<u16>,
        o: Outcome,
    ) -> Result<(), CliError> {
        if self.sink.is_none() {
            return Ok(());
        }
        let outcome = match o {
            Outcome::RetryLater(d) if d.is_zero() => "failure",
            o => OutcomeKind::of(&o).name(),
        };
        if probe {
            self.emit(Event::ProbeAnswer {
                t,
                call,
                status,
                outcome,
            })
        } else {
            self.emit(Event::Sent { t, call, outcome })
        }
    }

    /// Counts an answer that arrived at `t` for a request sent at `sent`.
    fn count_outcome(&mut self, t: u64, sent: u64, o: Outcome) -> Class {
        let (class, slot) = match o {
            Outcome::Success => (Class::Success, &mut self.s.upstream_outcomes.success),
            Outcome::Answer => (Class::Answer, &mut self.s.upstream_outcomes.answer),
            Outcome::RetryLater(d) if !d.is_zero() => {
                self.retry_after.told(t, d.as_nanos() as u64);
                (Class::RateLimited, &mut self.s.upstream_outcomes.retry_later)
            }
            Outcome::Timeout => (Class::Timeout, &mut self.s.upstream_outcomes.timeout),
            _ => (Class::Failure, &mut self.s.upstream_outcomes.failure),
        };
        *slot += 1;
        if let Some(c) = &mut self.chart {
            c.request(sent, class);
        }
        class
    }

    fn on_answer(
        &mut self,
        t: u64,
        mut cs: CallState,
        permit: Permit,
        answer: Answer,
        timed_out: bool,
        sent: u64,
    ) -> Result<(), CliError> {
        let w = cs.worker;
        let probe = permit.is_probe();
        let status = (!timed_out).then_some(answer.status);
        let headers = answer.retry_after.as_deref().map(|v| ("retry-after", v));
        if let Some(p) = &self.workers[w].policy {
            let (decision, outcome) = if timed_out {
                let d = p
                    .after_attempt(&mut cs.call, permit, Outcome::Timeout)
                    .map_err(internal)?;
                (d, Outcome::Timeout)
            } else {
                let (d, c) = p
                    .after_response(&mut cs.call, permit, i64::from(answer.status), headers)
                    .map_err(internal)?;
                (d, c.outcome)
            };
            self.count_outcome(t, sent, outcome);
            // A retry or a give-up gets its own line naming the status; only a request that ends
            // its call is folded into the "requests reached the upstream" runs.
            let ends = matches!(
                decision,
                Decision::Done
                    | Decision::GiveUp {
                        reason: GiveUpReason::NotRetryable,
                        ..
                    }
            );
            if probe || ends {
                self.answered(t, cs.id, probe, status, outcome)?;
            }
            self.drain(w)?;
            self.track_budget(t, w, matches!(outcome, Outcome::RetryLater(d) if !d.is_zero()));
            match decision {
                Decision::Done => {
                    self.s.calls_succeeded += 1;
                    self.end_call(t, w)
                }
                Decision::Retry { delay, source, .. } => {
                    if let Some(q) = &self.workers[w].quota {
                        let a = q.available();
                        self.s.quota_low_water = Some(self.s.quota_low_water.map_or(a, |lw| lw.min(a)));
                    }
                    self.wait(t, cs, delay.as_nanos() as u64, source.name(), status, true)
                }
                Decision::GiveUp { reason, server_delay } => {
                    self.give_up(t, &cs, reason, server_delay.is_some(), true)?;
                    self.end_call(t, w)
                }
            }
        } else {
            let outcome = if timed_out {
                Outcome::Timeout
            } else {
                let wall = holdoff::Clock::wall_at(&self.clock, Instant::from_nanos(t));
                self.classifier
                    .classify(answer.status, headers, wall)
                    .map_err(internal)?
                    .outcome
            };
            self.workers[w]
                .breaker
                .record(permit, outcome)
                .map_err(internal)?;
            self.count_outcome(t, sent, outcome);
            match outcome {
                Outcome::Success => self.s.calls_succeeded += 1,
                Outcome::Answer => self.s.calls_answered += 1,
                _ => self.s.calls_failed += 1,
            }
            self.answered(t, cs.id, probe, status, outcome)?;
            self.drain(w)?;
            self.end_call(t, w)
        }
    }

    fn track_budget(&mut self, t: u64, w: usize, rate_limited: bool) {
        let wk = &mut self.workers[w];
        let Some(b) = &wk.budget else { return };
        if !rate_limited && wk.rl_start.is_none() {
            return;
        }
        let start = b.episode_start();
        if start.is_some() && start != wk.rl_start {
            self.s.rate_limit_episodes += 1;
        }
        wk.rl_start = start;
        if let (true, Some(a)) = (rate_limited, start) {
            // The budget an episode has used is the time from its first rate-limited answer to
            // the latest one it decided on.
            self.note_spent(t.saturating_sub(a.as_nanos()));
        }
    }

    fn note_spent(&mut self, ns: u64) {
        let cur = self.s.budget_spent_ms.map_or(0, |m| m.0);
        self.s.budget_spent_ms = Some(Ms(cur.max(ns)));
    }

    fn on_recovery(&mut self, r: u64) -> Result<(), CliError> {
        self.s.upstream_recovered_at_ms = Some(Ms(r));
        if self.has_breaker {
            for wk in &mut self.workers {
                if matches!(wk.state, State::Closed | State::Disabled) {
                    wk.recovery_to_close = Some(Ms(0));
                    wk.pending_recovery = None;
                } else {
                    wk.recovery_to_close = None;
                    wk.pending_recovery = Some(r);
                }
            }
        }
        self.emit(Event::Recovered { t: r })
    }

    fn drain(&mut self, w: usize) -> Result<(), CliError> {
        let wk = &self.workers[w];
        if !wk.events_flag.load(Ordering::Relaxed) || !wk.events_flag.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let evs: Vec<StateChange> = std::mem::take(&mut *wk.events.lock().unwrap_or_else(|e| e.into_inner()));
        for ev in evs {
            self.on_state(w, ev)?;
        }
        Ok(())
    }

    fn on_state(&mut self, w: usize, ev: StateChange) -> Result<(), CliError> {
        let t = ev.at.as_nanos();
        let opened = ev.from == State::Closed && ev.to == State::Open;
        let closed = ev.reason == Reason::Recovered;
        let wk = &mut self.workers[w];
        if let Some(d) = ev.open_for {
            wk.interval = d.as_nanos() as u64;
        }
        if opened {
            wk.tally.opens += 1;
            if let Some((tc, iv)) = wk.last_close.take() {
                if t.saturating_sub(tc) <= iv {
                    self.s.premature_closes += 1;
                    self.s.largest_burst_after_close = self.s.largest_burst_after_close.max(wk.burst);
                }
            }
            wk.burst_live = false;
        }
        if closed {
            // Bring the upstream model up to the close, so a recovery just before it counts.
            self.upstream.advance_to(t)?;
            if let Some(r) = self.upstream.take_recovery() {
                self.on_recovery(r)?;
            }
            let wk = &mut self.workers[w];
            wk.last_close = Some((t, wk.interval));
            wk.burst_live = true;
            wk.burst = 0;
            if let Some(r) = wk.pending_recovery.take() {
                wk.recovery_to_close = Some(Ms(t.saturating_sub(r)));
            }
        }
        self.workers[w].state = ev.to;
        // The chart's state panel shows the first worker's breaker.
        if let (Some(c), 0) = (&mut self.chart, w) {
            c.state(t, state_row(ev.to), opened, closed);
        }
        let worker = self.named.then_some(w as u32);
        self.emit(Event::State {
            t,
            worker,
            from: ev.from,
            to: ev.to,
            reason: ev.reason,
            episode: ev.episode,
            open_for: ev.open_for.map(|d| d.as_nanos() as u64),
        })
    }

    fn finish(mut self, now: u64, skipped_by_callers: u64) -> Result<Run, CliError> {
        for w in 0..self.workers.len() {
            self.drain(w)?;
        }
        self.s.end_ms = Ms(now);
        let mut in_flight = 0;
        let mut to_close = Some(Ms(0));
        for wk in &mut self.workers {
            if self.has_breaker {
                let snap = wk.breaker.snapshot();
                self.s.opens += snap.opens;
                self.s.closes += snap.closes;
                self.s.probes += snap.probes;
                self.s.stale_answers += snap.stale_answers;
                wk.tally.probes = snap.probes;
            }
            in_flight += wk.active + wk.queue.len() as u64;
            // The fleet has closed after a recovery when its last worker has.
            to_close = match (to_close, wk.recovery_to_close) {
                (Some(a), Some(b)) => Some(Ms(a.0.max(b.0))),
                _ => None,
            };
            self.s.per_worker.push(wk.tally.clone());
        }
        if self.has_breaker && self.s.upstream_recovered_at_ms.is_some() {
            self.s.recovery_to_close_ms = to_close;
        }
        self.s.in_flight_at_end = in_flight;
        self.s.malformed_lines_skipped = self.upstream.skipped() + skipped_by_callers;
        if let Some(c) = &mut self.chart {
            c.finish(now);
        }
        Ok(Run {
            summary: self.s,
            chart: self.chart,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::KnownRetryAfter;

    #[test]
    fn a_retry_after_is_known_from_the_staleness_bound_to_its_end() {
        let mut k = KnownRetryAfter::new(50);
        k.told(1_000, 30_000);
        k.told(2_000, 100);
        assert!(!k.inside(1_049), "not yet known to every worker");
        assert!(k.inside(1_050));
        assert!(k.inside(30_999));
        // The second window ends inside its own staleness bound: it never counts.
        assert!(!k.inside(31_000), "over at its end");
        k.told(40_000, 5_000);
        assert!(!k.inside(40_010));
        assert!(k.inside(44_999) && !k.inside(45_000));
    }
}
