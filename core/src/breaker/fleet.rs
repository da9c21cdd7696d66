//! The breaker's side of a fleet link (docs/fleet.md): what the breaker tells the fleet (an
//! outbox of opens and probe answers, and whether callers were refused), and how a view of the
//! shared record moves the local breaker. Only the locked paths consult the link: the closed
//! fast path (`allow`, a success while closed under the consecutive policy) never does.
//!
//! [`FleetMember`](crate::fleet::FleetMember) drives it: `fleet_prepare` drains the outbox into
//! ops, the member exchanges them with the store (no lock held), and `fleet_view` applies the
//! answer.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::events::Transition;
use super::{Breaker, Inner, Reason, State};
use crate::clock::Instant;
use crate::fleet::{Exchanged, FleetOp, FleetState, Reply, Waker};

/// Ops kept for the next sync while the store fails; the oldest answers go first (opens are
/// coalesced into one).
const OUTBOX_CAPACITY: usize = 64;

/// Something the fleet must learn at the next sync, in local time.
#[derive(Debug, Clone, Copy)]
enum Pending {
    /// A trip or retry-later here: the first probe may go at `until`.
    Open { until: Instant, retry_later: bool },
    /// A probe admitted against a grant of fleet episode `episode`: its lease should run out
    /// when the local probe is lost, at `lost`.
    Admit { episode: u64, lost: Instant },
    /// An answer to a probe made under a grant of fleet episode `episode` (0: a stale failure);
    /// a failure's next probe may go at `reopen`.
    Answer { episode: u64, ok: bool, reopen: Instant },
    /// An operator's reset here: the open record of the newest episode this worker has seen
    /// when the op goes closes.
    Reset,
}

/// One breaker's link to its fleet, kept under the breaker's lock.
pub(crate) struct FleetLink {
    attached: bool,
    outbox: VecDeque<Pending>,
    demand: bool,
    grants: u32,
    grant_until: Instant,
    /// The newest fleet episode this worker saw.
    episode: u64,
    /// Whether the local open episode is the fleet's `episode` (false for an open the fleet has
    /// not confirmed yet: a trip not yet sent, or any open made on local evidence while
    /// detached, which the next exchange publishes).
    follows: bool,
    /// Whether that unconfirmed open carries a provider's retry-later.
    own_retry_later: bool,
    /// The configured probe timeout (`None`: the interval in force), for the lease of a probe.
    probe_timeout: Option<Duration>,
    recoveries: u32,
    refresh: Duration,
    waker: Option<Waker>,
    wake: bool,
}

/// What the member sends in one exchange, and what it needs to put back if the exchange fails.
pub(crate) struct Prepared {
    pub(crate) ops: Vec<FleetOp>,
    pending: Vec<Pending>,
    pub(crate) claimed: bool,
    sent_open: bool,
}

fn ceil_ms(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

impl FleetLink {
    /// Whether the link is attached: refusals then mark demand, under the lock.
    pub(super) fn is_attached(&self) -> bool {
        self.attached
    }

    fn live_grant(&mut self, t: Instant) -> bool {
        if self.grants > 0 && t >= self.grant_until {
            self.grants = 0;
        }
        self.grants > 0
    }

    fn push(&mut self, p: Pending) {
        if !self.attached {
            return;
        }
        if let Pending::Open { until, retry_later } = p {
            for q in self.outbox.iter_mut() {
                if let Pending::Open {
                    until: u,
                    retry_later: r,
                } = q
                {
                    *u = (*u).max(until);
                    *r |= retry_later;
                    self.wake = true;
                    return;
                }
            }
        }
        if self.outbox.len() >= OUTBOX_CAPACITY {
            if let Some(i) = self
                .outbox
                .iter()
                .position(|q| matches!(q, Pending::Answer { .. }))
            {
                self.outbox.remove(i);
            }
        }
        self.outbox.push_back(p);
        self.wake = true;
    }
}

impl Inner {
    fn link(&mut self) -> Option<&mut FleetLink> {
        self.fleet.as_deref_mut().filter(|l| l.attached)
    }

    /// A trip or a retry-later opened this breaker until `until`.
    /// Detached or attached, the open is now this worker's own until the fleet confirms it.
    pub(super) fn fleet_opened(&mut self, until: Instant, retry_later: bool) {
        if let Some(l) = self.fleet.as_deref_mut() {
            l.follows = false;
            l.own_retry_later = retry_later;
            // Detached, nothing is pushed, but the next exchange publishes this open: try it now.
            l.wake = true;
            l.push(Pending::Open { until, retry_later });
        }
    }

    /// A provider's retry-later reached this open breaker outside its current probe.
    pub(super) fn fleet_retry_later(&mut self, until: Instant) {
        if let Some(l) = self.fleet.as_deref_mut() {
            if !l.attached {
                // Local evidence while detached: published when the store answers again.
                l.follows = false;
                l.own_retry_later = true;
            }
            l.push(Pending::Open {
                until,
                retry_later: true,
            });
        }
    }

    /// The answer to a current probe; a failure's next probe may go at `reopen` (ignored for
    /// ok). A failure while detached makes the open this worker's own, as a trip would.
    pub(super) fn fleet_answer(&mut self, ok: bool, reopen: Instant) {
        if let Some(l) = self.fleet.as_deref_mut() {
            if !l.attached && !ok {
                l.follows = false;
            }
            let episode = l.episode;
            l.push(Pending::Answer { episode, ok, reopen });
        }
    }

    /// An operator's reset closed this breaker: the fleet record closes too. What the outbox
    /// held (this worker's own opens and answers) is superseded, and so is any grant.
    pub(super) fn fleet_reset(&mut self) {
        if let Some(l) = self.link() {
            l.outbox.clear();
            l.grants = 0;
            l.demand = false;
            l.follows = false;
            l.own_retry_later = false;
            l.push(Pending::Reset);
        }
    }

    /// A stale failure: evidence for the fleet too (it resets the fleet's recovery count).
    pub(super) fn fleet_stale_failure(&mut self) {
        if let Some(l) = self.link() {
            l.push(Pending::Answer {
                episode: 0,
                ok: false,
                reopen: Instant::ZERO,
            });
        }
    }

    /// Whether the fleet lets a probe go now: always when detached or unlinked; when attached,
    /// only against a live grant.
    pub(super) fn fleet_may_probe(&mut self, t: Instant) -> bool {
        match self.link() {
            None => true,
            Some(l) => l.live_grant(t),
        }
    }

    /// A probe went under a grant at `t`: the fleet learns it at once (the waker), so that the
    /// grant's lease runs from this admission, as the local probe timeout does.
    pub(super) fn fleet_spend_grant(&mut self, t: Instant) {
        let interval = self.interval;
        if let Some(l) = self.link() {
            l.grants = l.grants.saturating_sub(1);
            let episode = l.episode;
            let lost = t.saturating_add(l.probe_timeout.unwrap_or(interval));
            l.push(Pending::Admit { episode, lost });
        }
    }

    /// A call was refused while open: this worker has demand for the fleet's next probe.
    pub(super) fn fleet_demand(&mut self) {
        if let Some(l) = self.link() {
            l.demand = true;
        }
    }

    /// Whether the local ramp may close the breaker: not while attached (the fleet record
    /// closing does).
    pub(super) fn fleet_may_close(&self) -> bool {
        !self.fleet.as_deref().is_some_and(|l| l.attached)
    }

    /// The wait a refusal reports: when the local deadline has come but no grant is held, the
    /// next sync (`refresh`) is the earliest a probe could go.
    pub(super) fn fleet_wait(&self, t: Instant, wait: Duration) -> Duration {
        match self.fleet.as_deref() {
            Some(l) if l.attached && wait.is_zero() && !(l.grants > 0 && t < l.grant_until) => l.refresh,
            _ => wait,
        }
    }

    /// The waker to call once the lock is released, if an op was pushed since the last call.
    pub(super) fn fleet_take_wake(&mut self) -> Option<Waker> {
        let l = self.fleet.as_deref_mut()?;
        if !std::mem::take(&mut l.wake) {
            return None;
        }
        l.waker.clone()
    }
}

impl Breaker {
    /// Links this breaker to a fleet; false if it already has a link.
    pub(crate) fn fleet_link(&self, refresh: Duration) -> bool {
        let mut inner = self.lock();
        if inner.fleet.is_some() {
            return false;
        }
        inner.fleet = Some(Box::new(FleetLink {
            attached: true,
            outbox: VecDeque::new(),
            demand: false,
            grants: 0,
            grant_until: Instant::ZERO,
            episode: 0,
            follows: false,
            own_retry_later: false,
            probe_timeout: self.config().probe_timeout,
            recoveries: 0,
            refresh,
            waker: None,
            wake: false,
        }));
        true
    }

    /// Removes the link: the breaker is purely local again.
    pub(crate) fn fleet_unlink(&self) {
        if !self.may_have_link() {
            return;
        }
        self.lock().fleet = None;
    }

    /// Sets the callback called (outside the lock) whenever an op is pushed.
    pub(crate) fn fleet_set_waker(&self, waker: Option<Waker>) {
        if !self.may_have_link() {
            return;
        }
        if let Some(l) = self.lock().fleet.as_deref_mut() {
            l.waker = waker;
        }
    }

    /// Attaches or detaches the link. Detaching drops the outbox and any grant: the breaker is
    /// today's local breaker until it re-attaches.
    pub(crate) fn fleet_set_attached(&self, attached: bool) {
        if !self.may_have_link() {
            return;
        }
        // The lock for a change, not a peek: attaching decides whether a refusal may be
        // published for the lock-free path, which releasing this lock recomputes.
        if let Some(l) = self.lock().fleet.as_deref_mut() {
            if l.attached && !attached {
                l.outbox.clear();
                l.grants = 0;
                l.demand = false;
            }
            l.attached = attached;
        }
    }

    /// Whether the link is attached (false without a link).
    pub(crate) fn fleet_attached(&self) -> bool {
        self.peek()
            .is_some_and(|i| i.fleet.as_deref().is_some_and(|l| l.attached))
    }

    /// Whether the locked state, where a link lives, has been made: a breaker that has only been
    /// closed has no link, and asking about one (as any binding may, of any breaker) must not
    /// make the state. A link attached concurrently is ordered after such a call.
    fn may_have_link(&self) -> bool {
        self.slow.get().is_some()
    }

    /// The longest wait this breaker's configuration can produce: its open interval's cap, its
    /// `max_retry_later`, its probe timeout. A fleet deadline further away than this is not
    /// believed (docs/fleet.md, "What a worker does on each sync").
    pub(crate) fn fleet_max_wait(&self) -> Duration {
        let c = &self.profile.config;
        c.open_interval
            .max
            .max(c.max_retry_later)
            .max(c.probe_timeout.unwrap_or(Duration::ZERO))
    }

    /// Drains the outbox into ops at `t` and adds a claim when callers were refused, the local
    /// deadline has come and no grant is held. Attached or not, an open breaker publishes an
    /// open the fleet has not confirmed (made on local evidence while detached, or before the
    /// first sync), and, when `corrupt` (the last exchange found the record corrupt), the open
    /// it follows: an exchange carrying an open replaces a corrupt record.
    pub(crate) fn fleet_prepare(&self, worker: &str, t: Instant, corrupt: bool) -> Prepared {
        let mut inner = self.lock();
        let state = State::from_bits(self.word.load(Ordering::Acquire));
        let open = matches!(state, State::Open | State::HalfOpen);
        let eligible = t >= inner.eligible_at;
        let (interval, recovering) = (inner.interval, inner.recoveries > 0);
        let mut out = Prepared {
            ops: Vec::new(),
            pending: Vec::new(),
            claimed: false,
            sent_open: false,
        };
        let eligible_at = inner.eligible_at;
        let Some(l) = inner.fleet.as_deref_mut() else {
            return out;
        };
        out.pending = l.outbox.drain(..).collect();
        for p in &out.pending {
            out.ops.push(match *p {
                Pending::Open { until, retry_later } => {
                    out.sent_open = true;
                    FleetOp::Open {
                        seen_episode: l.episode + 1,
                        delay_ms: ceil_ms(until.saturating_since(t)),
                        retry_later,
                    }
                }
                Pending::Admit { episode, lost } => FleetOp::Admit {
                    worker: worker.to_owned(),
                    episode,
                    probe_timeout_ms: ceil_ms(lost.saturating_since(t)),
                },
                Pending::Answer { episode, ok, reopen } => FleetOp::Answer {
                    worker: worker.to_owned(),
                    episode,
                    ok,
                    recoveries_needed: self.config().recoveries,
                    reopen_ms: ceil_ms(reopen.saturating_since(t)),
                },
                Pending::Reset => FleetOp::Reset {
                    seen_episode: l.episode,
                },
            });
        }
        if open && !out.sent_open && (!l.follows || corrupt) {
            out.sent_open = true;
            out.ops.push(FleetOp::Open {
                seen_episode: if l.follows { l.episode } else { l.episode + 1 },
                delay_ms: ceil_ms(eligible_at.saturating_since(t)),
                retry_later: !l.follows && l.own_retry_later,
            });
        }
        let grant = l.live_grant(t);
        if l.attached && open && l.follows && l.demand && !grant && eligible {
            l.demand = false;
            // The ramp's pace: once the fleet counts an answer, the next window is the open
            // interval's first step, or the interval in force if shorter.
            let interval = if recovering || l.recoveries > 0 {
                interval.min(self.config().open_interval.initial)
            } else {
                interval
            };
            out.ops.push(FleetOp::Claim {
                worker: worker.to_owned(),
                episode: l.episode,
                max_probes: self.config().max_probes_in_flight,
                interval_ms: ceil_ms(interval),
                probe_timeout_ms: ceil_ms(self.config().probe_timeout.unwrap_or(interval)),
                max_wait_ms: ceil_ms(self.fleet_max_wait()),
            });
            out.claimed = true;
        }
        out
    }

    /// What a re-publish sent: an open, so that the view adopts the record's episode.
    pub(crate) fn fleet_prepare_republish(&self) -> Prepared {
        Prepared {
            ops: Vec::new(),
            pending: Vec::new(),
            claimed: false,
            sent_open: true,
        }
    }

    /// Puts back what a failed exchange did not deliver (a claim is not retried: demand is
    /// marked again by the next refused call).
    pub(crate) fn fleet_restore(&self, prepared: Prepared) {
        let mut inner = self.lock();
        if let Some(l) = inner.link() {
            for p in prepared.pending.into_iter().rev() {
                l.outbox.push_front(p);
            }
            while l.outbox.len() > OUTBOX_CAPACITY {
                l.outbox.pop_back();
            }
        }
    }

    /// Applies an exchange's record at local time `t`. Returns an op to send at once when the
    /// record lost the open this worker follows (flushed or expired): the worker re-publishes
    /// its open rather than closing.
    pub(crate) fn fleet_view(&self, x: &Exchanged, t: Instant, prepared: &Prepared) -> Option<FleetOp> {
        let mut inner = self.lock();
        let w = self.word.load(Ordering::Acquire);
        let state = State::from_bits(w);
        let rec = &x.record;
        let to_local = |ms: u64| t.saturating_add(Duration::from_millis(ms.saturating_sub(x.store_now_ms)));
        let link = inner.fleet.as_deref_mut()?;
        link.recoveries = rec.recoveries;
        let (seen, follows) = (link.episode, link.follows);
        link.episode = seen.max(rec.episode);
        // A reset not yet delivered closes the record this view shows open: following it would
        // re-open the breaker the operator just closed.
        let resetting = link.outbox.iter().any(|p| matches!(p, Pending::Reset));
        if resetting || matches!(state, State::ForcedOpen | State::Disabled) {
            return None;
        }
        let local_open = matches!(state, State::Open | State::HalfOpen);
        let rec_open = rec.state == FleetState::Open;
        if local_open && follows && !prepared.sent_open && !rec_open && rec.episode < seen {
            // The record lost the episode this worker is in.
            return Some(FleetOp::Open {
                seen_episode: seen,
                delay_ms: ceil_ms(inner.eligible_at.saturating_since(t)),
                retry_later: false,
            });
        }
        if rec_open {
            let fresh = !local_open || (follows && rec.episode != seen);
            // A record's deadline is believed up to this worker's own longest wait; beyond it
            // the local deadline already set stands (re-capping from each sync's now would push
            // the probe away for good).
            let (far, cap) = (
                to_local(rec.next_probe_at),
                t.saturating_add(self.fleet_max_wait()),
            );
            let target = if far <= cap {
                far
            } else if fresh {
                cap
            } else {
                inner.eligible_at.min(cap)
            };
            if fresh {
                let from_closed = !local_open;
                inner.start_afresh();
                if from_closed {
                    inner.opens += 1;
                }
                inner.interval = self.config().open_interval.interval(rec.step, &mut inner.rng);
                let change = Transition {
                    new_episode: true,
                    open_for: Some(target.saturating_since(t)),
                    ..Transition::new(w, State::Open, Reason::FleetOpened, t)
                };
                self.apply(&mut inner, change);
            }
            inner.step = rec.step.saturating_add(1);
            inner.recoveries = rec.recoveries;
            let l = inner.fleet.as_deref_mut()?;
            l.follows = true;
            l.own_retry_later = false;
            l.episode = rec.episode;
            let granted = x.replies.iter().find_map(|r| match r {
                Reply::Granted { expires_at } => Some(*expires_at),
                _ => None,
            });
            if let Some(expires_at) = granted.filter(|_| prepared.claimed) {
                l.grants += 1;
                l.grant_until = to_local(expires_at);
            }
            if l.live_grant(t) {
                // A grant makes the local probe due now.
                if inner.eligible_at > t || inner.window_admitted >= self.config().max_probes_in_flight {
                    inner.new_window(t);
                }
            } else if target != inner.eligible_at {
                inner.new_window(target);
            }
        } else if local_open && follows {
            // The fleet recovered (this episode or a later one this worker missed).
            self.close(&mut inner, w, t);
        }
        self.finish(inner);
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::breaker::tests::incident_one;

    #[test]
    fn asking_a_local_breaker_about_its_fleet_makes_no_locked_state() {
        // A binding may ask any breaker whether it is attached; a breaker without a link
        // answers false, and one that has only been closed stays as small as it was.
        let (b, _) = incident_one();
        assert!(!b.fleet_attached());
        b.fleet_set_attached(false);
        b.fleet_set_waker(None);
        b.fleet_unlink();
        assert!(b.peek().is_none(), "no link to find: nothing made");
    }
}
