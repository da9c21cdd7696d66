//! A counting global allocator: allocation calls and live heap bytes, counted only while a
//! measurement has switched counting on (the timed benchmarks run with it off, so that they pay
//! one relaxed load per allocation and no shared counter traffic).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() && ON.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            LIVE.fetch_add(layout.size() as i64, Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() && ON.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            LIVE.fetch_add(layout.size() as i64, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as i64, Relaxed);
        }
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() && ON.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
        }
        p
    }
}

/// What `f` allocated: (its result, allocation calls, net live heap bytes).
/// Everything `f` frees again is subtracted, so temporaries do not count.
pub fn counted<T>(f: impl FnOnce() -> T) -> (T, u64, i64) {
    let (a0, l0) = (ALLOCS.load(Relaxed), LIVE.load(Relaxed));
    ON.store(true, Relaxed);
    let out = f();
    ON.store(false, Relaxed);
    (out, ALLOCS.load(Relaxed) - a0, LIVE.load(Relaxed) - l0)
}
