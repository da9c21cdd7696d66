//! The shared record of one fleet key and [`apply`], the one statement of the fleet's rules.
//!
//! [`apply`] is pure: it reads the record, one op and the store's clock, and changes the record.
//! The in-memory store calls it; the Redis script is a line-by-line transcription of it (the
//! same field names, the same order of checks). Every time in the record is store-clock
//! milliseconds (docs/fleet.md, "The record").

/// Upper bound on the leases a record holds and on `max_probes` in a claim (the breaker's own
/// bound on `max_probes_in_flight`).
pub const MAX_LEASES: usize = crate::breaker::MAX_PROBES as usize;

/// Largest time, episode or count a record holds: Lua's numbers (the Redis script) are
/// doubles, exact below 2^53. Sums saturate here; a record holding more is refused.
pub const MAX_STORE_VALUE: u64 = (1 << 53) - 1;

/// Longest worker id a lease carries, in bytes.
pub const MAX_WORKER_LEN: usize = 128;

/// Whether the fleet is open. The record has no half-open: recovery progress is `recoveries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FleetState {
    /// Workers call freely (each still trips on its own evidence and tells the fleet).
    #[default]
    Closed,
    /// Workers refuse calls; probes go only against a grant.
    Open,
}

impl FleetState {
    /// `"closed"` or `"open"`: the stored spelling and the conformance name.
    pub fn name(self) -> &'static str {
        match self {
            FleetState::Closed => "closed",
            FleetState::Open => "open",
        }
    }

    /// The state stored as `name`; `None` for anything else.
    pub fn from_name(name: &str) -> Option<FleetState> {
        match name {
            "closed" => Some(FleetState::Closed),
            "open" => Some(FleetState::Open),
            _ => None,
        }
    }
}

/// One probe grant outstanding: which worker holds it and until when (store ms).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The worker's id (at most [`MAX_WORKER_LEN`] bytes).
    pub worker: String,
    /// Store ms at which the lease is lost (the probe timeout from its grant).
    pub expires_at: u64,
}

/// The shared record of one key. A key with no record reads as `FleetRecord::default()`
/// (closed, episode 0).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FleetRecord {
    /// The fleet's episode: +1 on every open from closed; 0 = never opened.
    pub episode: u64,
    /// Closed or open.
    pub state: FleetState,
    /// Store ms from which the fleet's next probe may be granted (while open).
    pub next_probe_at: u64,
    /// Store ms of the latest provider's `Retry-After` deadline of the current episode (an
    /// `Open` with `retry_later`); 0 = none. A failed probe never re-opens before it.
    pub hold_until: u64,
    /// Grants made in the current probe window.
    pub window_granted: u32,
    /// Answers to current-episode probes counted this episode.
    pub recoveries: u32,
    /// Failed probes this episode: the step of the open-interval backoff the next re-open uses
    /// is `step + 1`.
    pub step: u32,
    /// Probe grants outstanding (at most [`MAX_LEASES`]).
    pub leases: Vec<Lease>,
    /// Store ms of the last change.
    pub updated_at: u64,
}

impl FleetRecord {
    /// Checks a record read from a store: at most [`MAX_LEASES`] leases, each worker id
    /// non-empty and at most [`MAX_WORKER_LEN`] bytes, `window_granted` and `recoveries` at most
    /// [`MAX_LEASES`], episode 0 only while closed, every time and the episode at most
    /// [`MAX_STORE_VALUE`]. The error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let max = MAX_LEASES as u32;
        if self.leases.len() > MAX_LEASES {
            return Err("leases: more than 1000".into());
        }
        if self
            .leases
            .iter()
            .any(|l| l.worker.is_empty() || l.worker.len() > MAX_WORKER_LEN)
        {
            return Err("leases: a worker id is empty or longer than 128 bytes".into());
        }
        if self.window_granted > max {
            return Err("window_granted: more than 1000".into());
        }
        if self.recoveries > max {
            return Err("recoveries: more than 1000".into());
        }
        if self.episode == 0 && self.state == FleetState::Open {
            return Err("episode: 0 while open".into());
        }
        for (field, v) in [
            ("episode", self.episode),
            ("next_probe_at", self.next_probe_at),
            ("hold_until", self.hold_until),
            ("updated_at", self.updated_at),
        ] {
            if v > MAX_STORE_VALUE {
                return Err(format!("{field}: more than 2^53 - 1"));
            }
        }
        if self.leases.iter().any(|l| l.expires_at > MAX_STORE_VALUE) {
            return Err("leases: an expiry is more than 2^53 - 1".into());
        }
        Ok(())
    }
}

/// What a worker asks of the fleet. Each op carries what the store needs from the worker's
/// configuration (intervals computed by the worker's own backoff, the counts it needs), so the
/// store needs no configuration. Durations are milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FleetOp {
    /// A trip or a retry-later at a worker, or a worker re-publishing the open it is in (after
    /// the record was flushed or expired, or after a trip while detached).
    Open {
        /// The episode this open belongs to as the worker knows it: the last fleet episode it
        /// saw + 1 for a new trip, the episode it is in for a re-publish.
        seen_episode: u64,
        /// Time from the store's now until the first probe may go.
        delay_ms: u64,
        /// A provider's retry-later: an open fleet then waits at least this long.
        retry_later: bool,
    },
    /// A worker with refused callers asks for a probe grant.
    Claim {
        /// The claiming worker's id.
        worker: String,
        /// The fleet episode the worker is in.
        episode: u64,
        /// Grants per probe window (the worker's `max_probes_in_flight`, 1..=1000).
        max_probes: u32,
        /// The window to arm when this grant fills the current one.
        interval_ms: u64,
        /// How long the grant's lease holds its slot.
        probe_timeout_ms: u64,
        /// The longest wait this worker's own configuration can produce (its open interval's
        /// cap, its `max_retry_later`, its probe timeout bound): a record deadline beyond
        /// `now + max_wait_ms` is implausible and treated as due, a lease expiring beyond it is
        /// dropped.
        max_wait_ms: u64,
    },
    /// A worker's local breaker admitted a probe against its grant: the lease now runs from
    /// the admission, as the worker's local probe timeout does.
    Admit {
        /// The admitting worker's id.
        worker: String,
        /// The fleet episode the grant was made in.
        episode: u64,
        /// The probe's timeout: the lease expires this long after the admission.
        probe_timeout_ms: u64,
    },
    /// The answer to a probe made under a grant (or a stale failure, with `episode` 0).
    Answer {
        /// The answering worker's id.
        worker: String,
        /// The fleet episode the probe was granted in; 0 for a stale failure.
        episode: u64,
        /// A success or an answer (true); a failure, a timeout or a retry-later (false).
        ok: bool,
        /// Answers needed to close (the worker's `recoveries`, 1..=1000).
        recoveries_needed: u32,
        /// For a failure: time until the next probe (the next step of the worker's backoff, or
        /// the provider's delay).
        reopen_ms: u64,
    },
    /// An operator's reset at a worker (`Breaker::reset`): an open record of `seen_episode` or
    /// earlier closes, as a recovery would; a later episode (a trip the worker had not seen)
    /// stands.
    Reset {
        /// The newest fleet episode the resetting worker saw.
        seen_episode: u64,
    },
    /// Reads the record; changes nothing.
    Read,
}

/// What [`apply`] did with one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reply {
    /// The op changed the record.
    Applied,
    /// The op changed nothing (a stale answer, an open that does not move the probe, a read).
    Ignored,
    /// A claim was granted; the lease is lost at `expires_at` (store ms).
    Granted {
        /// Store ms at which the grant's lease is lost.
        expires_at: u64,
    },
    /// A claim was refused (not open, another episode, not due, or the window is full).
    Refused,
}

/// Applies `op` to `record` at store time `now` (ms) and says what it did. The one statement of
/// the fleet's rules (docs/fleet.md, "Rules"); `updated_at` is set on every change.
///
/// Every number an op carries, and `now`, is first capped at [`MAX_STORE_VALUE`] (as the Redis
/// store sends them), and every sum saturates there, so both stores hold the same records.
pub fn apply(record: &mut FleetRecord, op: &FleetOp, now: u64) -> Reply {
    let now = cap(now);
    let reply = match op {
        FleetOp::Open {
            seen_episode,
            delay_ms,
            retry_later,
        } => open(record, cap(*seen_episode), cap(*delay_ms), *retry_later, now),
        FleetOp::Claim {
            worker,
            episode,
            max_probes,
            interval_ms,
            probe_timeout_ms,
            max_wait_ms,
        } => claim(
            record,
            worker,
            cap(*episode),
            *max_probes,
            Window {
                interval_ms: cap(*interval_ms),
                probe_timeout_ms: cap(*probe_timeout_ms),
                max_wait_ms: cap(*max_wait_ms),
            },
            now,
        ),
        FleetOp::Admit {
            worker,
            episode,
            probe_timeout_ms,
        } => admit(record, worker, cap(*episode), cap(*probe_timeout_ms), now),
        FleetOp::Answer {
            worker,
            episode,
            ok,
            recoveries_needed,
            reopen_ms,
        } => answer(
            record,
            worker,
            cap(*episode),
            *ok,
            *recoveries_needed,
            cap(*reopen_ms),
            now,
        ),
        FleetOp::Reset { seen_episode } => reset(record, cap(*seen_episode)),
        FleetOp::Read => Reply::Ignored,
    };
    if reply != Reply::Ignored && reply != Reply::Refused {
        record.updated_at = now;
    }
    reply
}

fn cap(v: u64) -> u64 {
    v.min(MAX_STORE_VALUE)
}

/// `a + b`, saturating at [`MAX_STORE_VALUE`] (the Lua script's `sat_add`).
fn sat_add(a: u64, b: u64) -> u64 {
    cap(a.saturating_add(b))
}

fn open(r: &mut FleetRecord, seen_episode: u64, delay_ms: u64, retry_later: bool, now: u64) -> Reply {
    let until = sat_add(now, delay_ms);
    if r.state == FleetState::Closed {
        // A record that lost an episode a worker is in (flushed, expired) takes that episode
        // back, so the workers' views of it stay current.
        r.episode = sat_add(r.episode, 1).max(seen_episode);
        r.state = FleetState::Open;
        r.next_probe_at = until;
        r.hold_until = if retry_later { until } else { 0 };
        r.window_granted = 0;
        r.recoveries = 0;
        r.step = 0;
        r.leases.clear();
        return Reply::Applied;
    }
    // Already open: another worker's trip changes nothing (the first trip's probe time
    // stands); a retry-later is evidence and a deadline: recovery restarts, and the provider's
    // time is never shortened.
    if !retry_later {
        return Reply::Ignored;
    }
    r.recoveries = 0;
    if until > r.next_probe_at {
        r.next_probe_at = until;
        r.window_granted = 0;
    }
    r.hold_until = r.hold_until.max(until);
    Reply::Applied
}

fn reset(r: &mut FleetRecord, seen_episode: u64) -> Reply {
    if r.state != FleetState::Open || r.episode > seen_episode {
        return Reply::Ignored;
    }
    close(r);
    Reply::Applied
}

/// Closes an open record, as its last recovery does.
fn close(r: &mut FleetRecord) {
    r.state = FleetState::Closed;
    r.hold_until = 0;
    r.recoveries = 0;
    r.step = 0;
    r.window_granted = 0;
    r.leases.clear();
}

fn drop_expired(r: &mut FleetRecord, now: u64) {
    r.leases.retain(|l| l.expires_at > now);
}

fn valid_worker(worker: &str) -> bool {
    !worker.is_empty() && worker.len() <= MAX_WORKER_LEN
}

/// What a claim carries from the worker's configuration, capped.
struct Window {
    interval_ms: u64,
    probe_timeout_ms: u64,
    max_wait_ms: u64,
}

fn claim(r: &mut FleetRecord, worker: &str, episode: u64, max_probes: u32, w: Window, now: u64) -> Reply {
    if !valid_worker(worker) || r.state != FleetState::Open || episode != r.episode {
        return Reply::Refused;
    }
    // A deadline is believed up to the claiming worker's own longest wait: beyond it the record
    // is hostile (or from a store whose clock jumped) and must not park the fleet.
    if r.next_probe_at > sat_add(now, w.max_wait_ms) {
        r.next_probe_at = now;
    }
    if now < r.next_probe_at {
        return Reply::Refused;
    }
    let horizon = sat_add(now, w.probe_timeout_ms.max(w.max_wait_ms));
    r.leases.retain(|l| l.expires_at > now && l.expires_at <= horizon);
    let max = max_probes.clamp(1, MAX_LEASES as u32);
    if r.leases.len() >= max as usize {
        return Reply::Refused;
    }
    let expires_at = sat_add(now, w.probe_timeout_ms.max(1));
    r.leases.push(Lease {
        worker: worker.to_owned(),
        expires_at,
    });
    // The grant that fills the window re-arms it: lost or cancelled probes free their slot, but
    // the window stays spent. A full window always re-arms and restarts the count, so the count
    // never refuses a claim by itself.
    r.window_granted = r.window_granted.saturating_add(1);
    if r.window_granted >= max {
        r.next_probe_at = sat_add(now, w.interval_ms);
        r.window_granted = 0;
    }
    Reply::Granted { expires_at }
}

fn admit(r: &mut FleetRecord, worker: &str, episode: u64, probe_timeout_ms: u64, now: u64) -> Reply {
    if r.state != FleetState::Open || episode != r.episode {
        return Reply::Ignored;
    }
    match r
        .leases
        .iter_mut()
        .find(|l| l.worker == worker && l.expires_at > now)
    {
        Some(lease) => {
            lease.expires_at = sat_add(now, probe_timeout_ms.max(1));
            Reply::Applied
        }
        None => Reply::Ignored,
    }
}

fn answer(
    r: &mut FleetRecord,
    worker: &str,
    episode: u64,
    ok: bool,
    recoveries_needed: u32,
    reopen_ms: u64,
    now: u64,
) -> Reply {
    if r.state != FleetState::Open {
        return Reply::Ignored;
    }
    drop_expired(r, now);
    let lease = r.leases.iter().position(|l| l.worker == worker);
    let current = episode == r.episode && lease.is_some();
    if !current {
        // Stale: a failure is still evidence the upstream fails, a success proves nothing now.
        if ok || r.recoveries == 0 {
            return Reply::Ignored;
        }
        r.recoveries = 0;
        return Reply::Applied;
    }
    if let Some(i) = lease {
        r.leases.remove(i);
    }
    if ok {
        r.recoveries += 1;
        if r.recoveries >= recoveries_needed.clamp(1, MAX_LEASES as u32) {
            close(r);
        }
    } else {
        // The ramp is over: the other grants of this window belong to it. The next probe waits
        // the worker's next backoff step, not the window's re-arm, and never less than a
        // provider's Retry-After known this episode.
        r.recoveries = 0;
        r.step = r.step.saturating_add(1);
        r.next_probe_at = sat_add(now, reopen_ms).max(r.hold_until);
        r.window_granted = 0;
        r.leases.clear();
    }
    Reply::Applied
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
