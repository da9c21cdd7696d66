//! A breaker shared by a fleet of workers (`docs/fleet.md`): the configuration's `fleet` part
//! attaches every breaker `holdoff_breaker_new` builds (through `holdoff-fleet`), the breaker
//! handle owns the link, and these functions tick it by hand and control the in-process store.
//!
//! The fleet logic is the core's and `holdoff-fleet`'s; this module only carries it across.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use hcore::fleet::{FleetRecord, FleetState, StoreError, SyncReport};
use hcore::Breaker;
use holdoff_fleet::Fleet;

use crate::breaker::holdoff_breaker;
use crate::handle::{non_null, write, Handle};
use crate::http::bytes;
use crate::status::{boundary, holdoff_status, Fail};

/// A breaker's fleet link and its owners: its handle from `holdoff_breaker_new` and every policy
/// composed from it. The link closes (its threads joined, its connections closed, the breaker
/// local again) when the last owner lets go.
struct Link {
    fleet: Arc<Fleet>,
    owners: usize,
    // Held so that the breaker's address, the table's key, is not reused while the entry lives.
    _breaker: Arc<Breaker>,
}

/// The links of the breakers that have one, by the breaker's address. Most breakers have none
/// (every group member, most standalone ones), so the link lives here rather than in every
/// handle; `LINKED` counts the entries, so that freeing a handle in a process without fleets
/// takes no lock.
static LINKS: Mutex<Option<HashMap<usize, Link>>> = Mutex::new(None);
static LINKED: AtomicUsize = AtomicUsize::new(0);

fn links() -> MutexGuard<'static, Option<HashMap<usize, Link>>> {
    // Nothing under the lock panics halfway through a change.
    LINKS.lock().unwrap_or_else(|e| e.into_inner())
}

fn key(breaker: &Breaker) -> usize {
    breaker as *const Breaker as usize
}

/// Gives `breaker`'s new handle ownership of `fleet`.
pub(crate) fn link(breaker: &Arc<Breaker>, fleet: Fleet) {
    let entry = Link {
        fleet: Arc::new(fleet),
        owners: 1,
        _breaker: Arc::clone(breaker),
    };
    links()
        .get_or_insert_with(HashMap::new)
        .insert(key(breaker), entry);
    LINKED.fetch_add(1, Ordering::AcqRel);
}

/// `breaker`'s fleet link, if it has one.
pub(crate) fn fleet_of(breaker: &Breaker) -> Option<Arc<Fleet>> {
    if LINKED.load(Ordering::Acquire) == 0 {
        return None;
    }
    let table = links();
    table.as_ref()?.get(&key(breaker)).map(|l| Arc::clone(&l.fleet))
}

/// A policy composed from `breaker` owns its fleet link too (if it has one).
pub(crate) fn acquire(breaker: &Breaker) {
    if LINKED.load(Ordering::Acquire) == 0 {
        return;
    }
    if let Some(l) = links().as_mut().and_then(|t| t.get_mut(&key(breaker))) {
        l.owners += 1;
    }
}

/// An owner of `breaker`'s fleet link (its handle, a policy) lets go; the last one closes it.
/// Nothing for a breaker without a link.
pub(crate) fn release(breaker: &Breaker) {
    if LINKED.load(Ordering::Acquire) == 0 {
        return;
    }
    let closed = {
        let mut table = links();
        let Some(t) = table.as_mut() else { return };
        match t.get_mut(&key(breaker)) {
            Some(l) if l.owners > 1 => {
                l.owners -= 1;
                None
            }
            Some(_) => {
                LINKED.fetch_sub(1, Ordering::AcqRel);
                t.remove(&key(breaker))
            }
            None => None,
        }
    };
    // Closed and dropped outside the lock: closing joins the link's threads, and dropping the
    // entry may drop the breaker.
    if let Some(l) = closed {
        l.fleet.close();
    }
}

/// The state of a fleet's shared record.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_fleet_state {
    /// No worker's breaker is open for the fleet.
    Closed = 0,
    /// The fleet is open: every attached worker refuses until the fleet's next probe.
    Open = 1,
}

/// Why a fleet sync's exchange with the store failed (`holdoff_fleet_sync.error`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_fleet_error {
    /// The exchange succeeded.
    None = 0,
    /// The store could not be reached or did not answer within `fleet.timeout`.
    Unavailable = 1,
    /// The store holds a record that is not a valid fleet record (refused, never used).
    Corrupt = 2,
}

/// What `holdoff_memory_store_control` does to an in-process store (`memory://<name>`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum holdoff_memory_store_action {
    /// Every exchange fails (`HOLDOFF_FLEET_ERROR_UNAVAILABLE`) until `UP`.
    Down = 0,
    /// Exchanges work again; records are kept.
    Up = 1,
    /// Every record is wiped, as a Redis `FLUSHDB` or an expiry would.
    Flush = 2,
    /// A fresh store: every record wiped and the store up (a runner, before each case).
    Reset = 3,
}

/// What one `holdoff_breaker_sync_fleet` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct holdoff_fleet_sync {
    /// The fleet record's episode (`has_record`): 0 before the fleet ever opened.
    pub fleet_episode: u64,
    /// The fleet's next probe time, store-clock milliseconds (`has_record`).
    pub next_probe_at_ms: u64,
    /// Operations sent to the store (trips, claims, answers, a re-publish).
    pub sent: u64,
    /// The `holdoff_fleet_state` of the record (`has_record`).
    pub fleet_state: u32,
    /// Probe answers the fleet counted this episode (`has_record`).
    pub fleet_recoveries: u32,
    /// The `holdoff_fleet_error`: `NONE` when `ok`.
    pub error: u32,
    /// 1 if the exchange succeeded and the record was applied to the breaker.
    pub ok: u8,
    /// 1 if the breaker follows the fleet after this sync (0: detached, a local breaker).
    pub attached: u8,
    /// 1 if this sync detached the breaker (`fleet.fallback_after` without a successful sync).
    pub detached: u8,
    /// 1 if this sync attached a detached breaker again.
    pub reattached: u8,
    /// 1 if this sync claimed a probe grant and got it (the breaker's next probe may go now).
    pub granted: u8,
    /// 1 if the `fleet_*` and `next_probe_at_ms` fields hold the record (only when `ok`).
    pub has_record: u8,
}

impl From<&SyncReport> for holdoff_fleet_sync {
    fn from(r: &SyncReport) -> Self {
        let record = r.record.clone().unwrap_or_default();
        let state = match record.state {
            FleetState::Closed => holdoff_fleet_state::Closed,
            FleetState::Open => holdoff_fleet_state::Open,
        };
        let error = match r.error {
            None => holdoff_fleet_error::None,
            Some(StoreError::Unavailable(_)) => holdoff_fleet_error::Unavailable,
            Some(StoreError::Corrupt(_)) => holdoff_fleet_error::Corrupt,
        };
        let FleetRecord {
            episode,
            next_probe_at,
            recoveries,
            ..
        } = record;
        holdoff_fleet_sync {
            fleet_episode: episode,
            next_probe_at_ms: next_probe_at,
            sent: r.sent as u64,
            fleet_state: state as u32,
            fleet_recoveries: recoveries,
            error: error as u32,
            ok: u8::from(r.ok),
            attached: u8::from(r.attached),
            detached: u8::from(r.detached),
            reattached: u8::from(r.reattached),
            granted: u8::from(r.granted),
            has_record: u8::from(r.record.is_some()),
        }
    }
}

/// A fleet that cannot be attached or ticked, as a status: a configuration problem names its
/// field (`fleet.url` for a `rediss://` url in a build without TLS); a breaker without a fleet
/// (or whose link was closed) is `INVALID_INPUT` on `breaker`.
pub(crate) fn fleet_fail(e: holdoff_fleet::FleetError) -> Fail {
    use holdoff_fleet::FleetError as E;
    match e {
        E::Config(c) => c.into(),
        E::TlsNotBuilt => Fail::new(holdoff_status::InvalidConfig, "fleet.url", e.to_string()),
        // Attaching connects nothing and a tick reports a failed store in its result, so a
        // store error never reaches here; it would be the fleet's input that failed.
        E::Store(_) => Fail::input("fleet", e.to_string()),
        E::AlreadyAttached | E::Closed => Fail::input("breaker", e.to_string()),
    }
}

/// Ticks the breaker's fleet now: sends what the breaker queued (a trip, a retry-later, a
/// probe's answer; a claim when callers were refused and the fleet's probe is due), makes one
/// exchange with the store (bounded by `fleet.timeout`) and applies the shared record to the
/// breaker. A Redis fleet does this in the background (every `fleet.refresh`, and at once when
/// the breaker queues something or another worker changes the record); this is for tests,
/// conformance runners and `memory://` fleets, which have no thread. A store that fails is in
/// the result (`ok` 0, `error`), not an error. Writes what it did to `*out`.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `breaker` when the breaker has no fleet (its
/// configuration had no `fleet` part, or it came from a group); `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_sync_fleet(
    breaker: *const holdoff_breaker,
    out: *mut holdoff_fleet_sync,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out, "out")?;
        let fleet = fleet_of(b).ok_or_else(|| {
            Fail::input(
                "breaker",
                "this breaker has no fleet (its configuration has no fleet part)",
            )
        })?;
        let report = fleet.sync_now().map_err(fleet_fail)?;
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out, holdoff_fleet_sync::from(&report)) };
        Ok(holdoff_status::Ok)
    })
}

/// Writes 1 to `*out_attached` if the breaker follows its fleet now, 0 if it has no fleet or
/// runs as a local breaker (detached after `fleet.fallback_after` without a successful sync).
///
/// Errors: `HOLDOFF_STATUS_NULL_PARAMETER`.
///
/// # Safety
/// `breaker` must be NULL or a live breaker handle; `out_attached` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn holdoff_breaker_fleet_attached(
    breaker: *const holdoff_breaker,
    out_attached: *mut u8,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { holdoff_breaker::borrow(breaker)? };
        non_null(out_attached, "out_attached")?;
        let attached = fleet_of(b).is_some_and(|f| f.is_attached());
        // SAFETY: checked non-NULL; valid by contract.
        unsafe { write(out_attached, u8::from(attached)) };
        Ok(holdoff_status::Ok)
    })
}

/// **For tests.** Controls the in-process store `memory://<name>` (`name`: UTF-8, `name_len`
/// bytes) that fleets with that url share: `action` is a `holdoff_memory_store_action` (down, up,
/// flush, reset). A store that does not exist yet is created.
///
/// Errors: `HOLDOFF_STATUS_INVALID_INPUT` naming `action` for an unknown action, `name` for text
/// that is not UTF-8; `HOLDOFF_STATUS_NULL_PARAMETER` (`name` may be NULL only if `name_len` is
/// 0).
///
/// # Safety
/// `name` must be valid for reading `name_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn holdoff_memory_store_control(
    name: *const c_char,
    name_len: usize,
    action: u32,
) -> holdoff_status {
    boundary(|| {
        // SAFETY: forwarded contract.
        let name = unsafe { bytes(name, name_len, "name")? };
        let name = std::str::from_utf8(name).map_err(|_| Fail::input("name", "must be UTF-8"))?;
        let action = match action {
            0 => "down",
            1 => "up",
            2 => "flush",
            3 => {
                hcore::fleet::memory_store_reset(name);
                return Ok(holdoff_status::Ok);
            }
            _ => {
                return Err(Fail::input(
                    "action",
                    format!("{action} is not a holdoff_memory_store_action"),
                ))
            }
        };
        hcore::fleet::memory_store_control(name, action)?;
        Ok(holdoff_status::Ok)
    })
}

/// The stable name of a `holdoff_fleet_state` (`closed`, `open`); NULL for an unknown value.
/// Static string.
#[no_mangle]
pub extern "C" fn holdoff_fleet_state_name(state: u32) -> *const c_char {
    static NAMES: OnceLock<[CString; 2]> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        [FleetState::Closed, FleetState::Open].map(|s| CString::new(s.name()).unwrap_or_default())
    });
    names.get(state as usize).map_or(std::ptr::null(), |n| n.as_ptr())
}
