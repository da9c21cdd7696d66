//! Opaque handles: every `holdoff_<object>*` is an `Arc<T>` turned into a raw pointer.
//!
//! Ownership is encoded once here (rustls-ffi's `Castable` idea, with only the `Arc` kind):
//! `_new` functions hand out [`Handle::into_ptr`], `_free` takes it back with
//! [`Handle::free`], every method borrows with [`Handle::borrow`]. Casts happen nowhere else.
//!
//! Every build counts live handles (`holdoff_debug_live_handles`), so a runner can assert it
//! freed everything. Debug builds (`debug_assertions`) also keep a registry of live handle
//! addresses and their types: a method called on a freed handle, or on a handle of another type,
//! returns `HOLDOFF_STATUS_INVALID_HANDLE` instead of reading freed memory; a double free is
//! ignored instead of corrupting the heap. The registry costs a lock per call, so release
//! builds skip it.
//!
//! An address is only a safe key while the allocator does not hand it out again: a handle
//! freed and then a new object of the same type at the same address would make the stale
//! handle look alive (the common "free, create, use the old pointer" bug). Debug builds
//! therefore hold on to the references of the last [`QUARANTINE`] freed handles (the objects
//! stay allocated, unreachable from C) so that their addresses cannot be reused meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::status::{holdoff_status, Fail};

static LIVE: AtomicU64 = AtomicU64::new(0);

/// The kinds of handle, for the debug registry's type check.
#[cfg_attr(not(debug_assertions), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Clock,
    Config,
    Breaker,
    Group,
    KeyList,
    MetricList,
    Budget,
    RetryState,
    Quota,
    Classifier,
    Policy,
    PolicyCall,
    Execution,
}

/// How many freed objects debug builds keep allocated so their addresses are not reused.
#[cfg(debug_assertions)]
pub(crate) const QUARANTINE: usize = 4096;

#[cfg(debug_assertions)]
mod registry {
    use super::Kind;
    use std::any::Any;
    use std::collections::{HashMap, VecDeque};
    use std::sync::Mutex;

    type Held = Box<dyn Any + Send>;
    static QUARANTINED: Mutex<VecDeque<Held>> = Mutex::new(VecDeque::new());

    /// Keeps a freed handle's last reference (hence its memory) until [`super::QUARANTINE`]
    /// later frees push it out.
    pub(super) fn quarantine(reference: Held) {
        let evicted = {
            let mut q = QUARANTINED.lock().unwrap_or_else(|e| e.into_inner());
            q.push_back(reference);
            if q.len() > super::QUARANTINE {
                q.pop_front()
            } else {
                None
            }
        };
        // Dropped outside the lock: an object's drop may release other objects.
        drop(evicted);
    }

    // Address -> (kind, handles outstanding at that address). A group hands out the same
    // `Arc<Breaker>` (hence the same address) more than once.
    static LIVE: Mutex<Option<HashMap<usize, (Kind, usize)>>> = Mutex::new(None);

    fn with<R>(f: impl FnOnce(&mut HashMap<usize, (Kind, usize)>) -> R) -> R {
        let mut g = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        f(g.get_or_insert_with(HashMap::new))
    }

    pub(super) fn add(addr: usize, kind: Kind) {
        with(|m| {
            let e = m.entry(addr).or_insert((kind, 0));
            e.0 = kind;
            e.1 += 1;
        });
    }

    pub(super) fn check(addr: usize, kind: Kind) -> Result<(), String> {
        with(|m| match m.get(&addr) {
            Some((k, _)) if *k == kind => Ok(()),
            Some((k, _)) => Err(format!(
                "a {k:?} handle was passed where a {kind:?} handle is expected"
            )),
            None => Err(format!("this {kind:?} handle was freed (or never created)")),
        })
    }

    pub(super) fn remove(addr: usize, kind: Kind) -> Result<(), String> {
        check(addr, kind)?;
        with(|m| {
            if let Some(e) = m.get_mut(&addr) {
                e.1 -= 1;
                if e.1 == 0 {
                    m.remove(&addr);
                }
            }
        });
        Ok(())
    }
}

/// An opaque C type standing for an `Arc<Self::Target>`.
pub(crate) trait Handle: Sized {
    type Target: Send + Sync + 'static;
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    const KIND: Kind;
    /// The parameter name used in NULL and invalid-handle errors.
    const PARAM: &'static str;

    /// Called once by [`Handle::free`] for a valid handle, before its reference is released:
    /// lets an object give back what the C handle owned (a fleet link) even while debug builds
    /// keep the object itself allocated in quarantine.
    fn on_free(_target: &Self::Target) {}

    /// Hands ownership of one reference to C.
    fn into_ptr(value: Arc<Self::Target>) -> *mut Self {
        let ptr = Arc::into_raw(value) as *mut Self;
        LIVE.fetch_add(1, Ordering::Relaxed);
        #[cfg(debug_assertions)]
        registry::add(ptr as usize, Self::KIND);
        ptr
    }

    /// Borrows the object behind a handle for the duration of a call.
    ///
    /// # Safety
    /// `ptr` must be NULL or a pointer returned by [`Handle::into_ptr`] for this type that was
    /// not freed yet and is not freed during the returned borrow (the header's contract: `_free`
    /// must not race with other calls on the same handle). Debug builds detect a freed or
    /// mistyped handle instead of relying on this.
    unsafe fn borrow<'a>(ptr: *const Self) -> Result<&'a Self::Target, Fail> {
        if ptr.is_null() {
            return Err(Fail::null(Self::PARAM));
        }
        #[cfg(debug_assertions)]
        registry::check(ptr as usize, Self::KIND)
            .map_err(|m| Fail::new(holdoff_status::InvalidHandle, Self::PARAM, m))?;
        // SAFETY: non-NULL, and by the caller's contract a live `Arc<Target>` pointer
        // (`into_ptr` made it with `Arc::into_raw`); the Arc's reference it stands for keeps the
        // target alive for the borrow.
        Ok(unsafe { &*(ptr as *const Self::Target) })
    }

    /// A new owning reference to the object behind a handle (the handle stays valid).
    ///
    /// # Safety
    /// As for [`Handle::borrow`].
    unsafe fn clone_arc(ptr: *const Self) -> Result<Arc<Self::Target>, Fail> {
        // SAFETY: forwarded contract; `borrow` checks NULL (and, in debug builds, liveness).
        unsafe { Self::borrow(ptr)? };
        let target = ptr as *const Self::Target;
        // SAFETY: `target` came from `Arc::into_raw` and the handle's own reference is still
        // held, so incrementing the strong count is sound; `from_raw` then takes the new count.
        unsafe {
            Arc::increment_strong_count(target);
            Ok(Arc::from_raw(target))
        }
    }

    /// Releases the handle's reference. NULL does nothing; in debug builds a handle already
    /// freed (or of another type) is reported instead of freed twice.
    ///
    /// # Safety
    /// `ptr` must be NULL or a live handle of this type, not used again afterwards, and no other
    /// call may be using it concurrently.
    unsafe fn free(ptr: *mut Self) -> holdoff_status {
        if ptr.is_null() {
            return holdoff_status::Ok;
        }
        #[cfg(debug_assertions)]
        if let Err(m) = registry::remove(ptr as usize, Self::KIND) {
            let fail = Fail::new(holdoff_status::InvalidHandle, Self::PARAM, m);
            return crate::status::boundary(|| Err(fail));
        }
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: by the caller's contract `ptr` is a live handle made by `into_ptr` from an
        // `Arc<Target>` whose reference it owns; rebuilding the Arc takes back exactly that
        // reference, once (the registry refused a second free above in debug builds).
        let reference = unsafe { Arc::from_raw(ptr as *const Self::Target) };
        Self::on_free(&reference);
        #[cfg(debug_assertions)]
        registry::quarantine(Box::new(reference));
        #[cfg(not(debug_assertions))]
        drop(reference);
        holdoff_status::Ok
    }
}

/// Writes an out-parameter whose pointer the caller already checked for NULL.
///
/// # Safety
/// `out` must be non-NULL, aligned and valid for a write of `T`.
pub(crate) unsafe fn write<T>(out: *mut T, value: T) {
    // SAFETY: forwarded contract. `write` does not drop the old (possibly uninitialised) value.
    unsafe { out.write(value) }
}

/// Fails with `HOLDOFF_STATUS_NULL_PARAMETER` naming `param` if `ptr` is NULL.
pub(crate) fn non_null<T>(ptr: *const T, param: &str) -> Result<(), Fail> {
    if ptr.is_null() {
        Err(Fail::null(param))
    } else {
        Ok(())
    }
}

/// Handles alive now (created and not yet freed), counting every type, in every build.
/// A program that freed everything it created sees 0: the conformance runners of C, Go and C#
/// assert it at exit to prove their free, finalizer and `Dispose` paths.
#[no_mangle]
pub extern "C" fn holdoff_debug_live_handles() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

/// Whether this library build checks handles against a registry (debug builds): if 1, a
/// freed or mistyped handle gives `HOLDOFF_STATUS_INVALID_HANDLE` instead of undefined
/// behaviour.
#[no_mangle]
pub extern "C" fn holdoff_debug_checks_handles() -> u8 {
    u8::from(cfg!(debug_assertions))
}

/// Ties an opaque C type (declared as a plain struct so cbindgen sees it) to its `Arc` target.
/// `on_free = path` names a `fn(&Target)` run when a handle is freed ([`Handle::on_free`]).
macro_rules! handle {
    ($name:ident => $target:ty, $kind:ident, $param:literal) => {
        impl $crate::handle::Handle for $name {
            type Target = $target;
            const KIND: $crate::handle::Kind = $crate::handle::Kind::$kind;
            const PARAM: &'static str = $param;
        }
    };
    ($name:ident => $target:ty, $kind:ident, $param:literal, on_free = $hook:path) => {
        impl $crate::handle::Handle for $name {
            type Target = $target;
            const KIND: $crate::handle::Kind = $crate::handle::Kind::$kind;
            const PARAM: &'static str = $param;

            fn on_free(target: &$target) {
                $hook(target)
            }
        }
    };
}
pub(crate) use handle;
