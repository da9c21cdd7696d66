//! The two background threads of one attached breaker on Redis.
//!
//! * The **sync thread** calls [`FleetMember::sync`] when woken: by the breaker's waker (it
//!   pushed an op: a trip, a retry-later, a refusal wanting a probe, a probe's answer), by the
//!   subscriber (another worker changed the record), or after `refresh` without a wake.
//! * The **subscriber thread** holds a `SUBSCRIBE` on the key's channel and wakes the sync
//!   thread on every message; after a reconnect it wakes it too (messages may have been missed).
//!
//! Two threads because a blocking pub/sub read cannot also wait on the breaker's waker. Neither
//! is ever on a caller's path: a call only runs the waker, which sets a flag under a mutex held
//! for a few instructions and signals a condvar.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use holdoff::fleet::{FleetMember, StoreError};

use crate::conn;
use crate::store::{record_key, RedisStore, BACKOFF_CAP};
use crate::FleetError;

/// How long the subscriber's read waits before checking whether it should stop (its close is
/// normally immediate: the sync thread publishes on the private channel when it exits).
const IDLE_READ: Duration = Duration::from_millis(250);

#[derive(Default)]
struct Flags {
    pending: bool,
    stop: bool,
}

/// Wakes the threads: a flag under a mutex, and a condvar.
#[derive(Default)]
pub(crate) struct Signal {
    flags: Mutex<Flags>,
    cond: Condvar,
}

impl Signal {
    fn lock(&self) -> std::sync::MutexGuard<'_, Flags> {
        self.flags.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn wake(&self) {
        self.lock().pending = true;
        self.cond.notify_all();
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.cond.notify_all();
    }

    fn stopped(&self) -> bool {
        self.lock().stop
    }

    /// Waits until woken, stopped, or `period` passed; consumes the wake. Returns `true` when
    /// stopped.
    fn wait(&self, period: Duration) -> bool {
        self.wait_for(period, true)
    }

    /// Sleeps `period` unless stopped first (a wake does not cut it short). Returns `true` when
    /// stopped.
    fn sleep(&self, period: Duration) -> bool {
        self.wait_for(period, false)
    }

    fn wait_for(&self, period: Duration, wakes: bool) -> bool {
        let deadline = Instant::now() + period;
        let mut f = self.lock();
        while !(f.stop || wakes && f.pending) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            f = self
                .cond
                .wait_timeout(f, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if wakes {
            f.pending = false;
        }
        f.stop
    }
}

/// The running threads of one fleet.
pub(crate) struct Threads {
    signal: Arc<Signal>,
    handles: Vec<JoinHandle<()>>,
}

/// The sync thread: one sync per wake or `refresh`. After a corrupt record the store itself
/// waits (25 ms doubling to 1 s, jittered) before asking Redis again, failing the syncs in
/// between at once, as while reconnecting: a fleet reading a hostile record does not repeat the
/// script's checks every `refresh`.
fn sync_loop(member: &FleetMember, store: &RedisStore, signal: &Signal) {
    let refresh = member.config().refresh;
    // The attach made the first exchange: the first sync here is one `refresh` (or a wake) later.
    while !signal.wait(refresh) {
        member.sync(store);
    }
}

fn spawn_error(what: &str, e: &std::io::Error) -> FleetError {
    FleetError::Store(StoreError::Unavailable(format!(
        "could not start the fleet's {what} thread: {e}"
    )))
}

impl Threads {
    /// Starts the subscriber and sync threads. Errors: [`FleetError::Store`]
    /// ([`StoreError::Unavailable`]) when the system refuses a thread; nothing is left running.
    pub fn start(member: Arc<FleetMember>, store: Arc<RedisStore>) -> Result<Threads, FleetError> {
        let signal = Arc::new(Signal::default());
        let waker = Arc::clone(&signal);
        member.set_waker(Some(Arc::new(move || waker.wake())));
        let channel = record_key(&member.config().key);
        // Private: the sync thread publishes here when it exits so the subscriber's blocking
        // read returns at once.
        let bye = format!("{channel}:bye:{}", member.worker());
        let timeout = member.config().timeout;

        let sub = {
            let (signal, target) = (Arc::clone(&signal), store.target().clone());
            let (channel, bye) = (channel.clone(), bye.clone());
            std::thread::Builder::new()
                .name("holdoff-fleet-sub".into())
                .spawn(move || subscribe_loop(&signal, &target, timeout, &channel, &bye))
        };
        let sub = match sub {
            Ok(h) => h,
            Err(e) => {
                member.set_waker(None);
                return Err(spawn_error("subscriber", &e));
            }
        };
        let sync = {
            let (signal, member) = (Arc::clone(&signal), Arc::clone(&member));
            std::thread::Builder::new()
                .name("holdoff-fleet-sync".into())
                .spawn(move || {
                    sync_loop(&member, &store, &signal);
                    store.publish(&bye, "bye");
                })
        };
        match sync {
            Ok(sync) => Ok(Threads {
                signal,
                handles: vec![sync, sub],
            }),
            Err(e) => {
                member.set_waker(None);
                Threads {
                    signal,
                    handles: vec![sub],
                }
                .stop();
                Err(spawn_error("sync", &e))
            }
        }
    }

    /// Stops both threads and joins them.
    pub fn stop(self) {
        self.signal.stop();
        for h in self.handles {
            let _ = h.join();
        }
    }
}

fn subscribe_loop(signal: &Signal, target: &conn::Target, timeout: Duration, channel: &str, bye: &str) {
    let mut failures: u32 = 0;
    while !signal.stopped() {
        let ended_ok = match conn::connect(target, timeout) {
            Ok(mut c) => listen(signal, &mut c, channel, bye),
            Err(_) => false,
        };
        if ended_ok {
            return;
        }
        failures = failures.saturating_add(1);
        let backoff = (Duration::from_millis(25) * (1 << failures.min(6))).min(BACKOFF_CAP);
        if signal.sleep(backoff) {
            return;
        }
    }
}

/// Listens until stopped (`true`) or the connection fails (`false`).
fn listen(signal: &Signal, c: &mut redis::Connection, channel: &str, bye: &str) -> bool {
    let mut ps = c.as_pubsub();
    if ps.subscribe(&[channel, bye]).is_err() || ps.set_read_timeout(Some(IDLE_READ)).is_err() {
        return false;
    }
    // Subscribed again: whatever was published meanwhile is read by one sync now.
    signal.wake();
    loop {
        if signal.stopped() {
            return true;
        }
        match ps.get_message() {
            Ok(msg) if msg.get_channel_name() == channel => signal.wake(),
            Ok(_) => {}
            Err(e) if e.is_timeout() => {}
            Err(_) => return false,
        }
    }
}
