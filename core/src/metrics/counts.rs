//! Counters a call can bump without a lock and without sharing a cache line with another
//! thread: each counter block has one stripe per thread slot, and a thread owns its slot, so a
//! count is a plain load and store on a line no other thread writes. Threads beyond the owned
//! slots share one last stripe through atomic additions, which stay correct, only slower.
//!
//! A block is allocated the first time something reads its owner's metrics
//! ([`LazyCounts::enable`]); until then its owner holds one null pointer and a call pays one
//! pointer load and a branch.
//!
//! The slot is `once_cell`'s `OnceBox`: one pointer (8 bytes, where a `OnceLock<Box<_>>`
//! takes 16, in every breaker, policy and quota), set once by a compare-and-swap and freed on
//! drop.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use once_cell::race::OnceBox;

/// Stripes a thread can own; one more is shared by every other thread.
const OWNED: usize = 8;
const SHARED: usize = OWNED;

#[cfg(not(loom))]
/// Slots returned by threads that ended, so a pool that replaces its threads keeps owning them.
static FREE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
#[cfg(not(loom))]
static NEXT: AtomicUsize = AtomicUsize::new(0);

#[cfg(not(loom))]
struct Slot(usize);

#[cfg(not(loom))]
impl Slot {
    fn claim() -> Slot {
        let reused = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(s) = reused {
            return Slot(s);
        }
        let s = NEXT.fetch_add(1, Ordering::Relaxed);
        Slot(if s < OWNED { s } else { SHARED })
    }
}

#[cfg(not(loom))]
impl Drop for Slot {
    fn drop(&mut self) {
        // The mutex orders this thread's last plain stores before the next owner's loads.
        if self.0 != SHARED {
            FREE.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static SLOT: Slot = Slot::claim();
}

/// This thread's stripe: its own, or the shared one (also while thread-locals are being torn
/// down, and always under loom, whose threads share one OS thread).
#[inline]
fn slot() -> usize {
    #[cfg(not(loom))]
    {
        SLOT.try_with(|s| s.0).unwrap_or(SHARED)
    }
    #[cfg(loom)]
    {
        SHARED
    }
}

/// Eight counters on one cache line.
#[repr(align(64))]
struct Stripe([AtomicU64; 8]);

/// Up to eight counters bumped on a call's path (`S` of them), striped by thread, and `T`
/// counters bumped on rare paths (state changes, give-ups) with plain atomic additions.
pub(crate) struct Counts<const T: usize> {
    stripes: [Stripe; OWNED + 1],
    rare: [AtomicU64; T],
}

impl<const T: usize> Counts<T> {
    fn new() -> Self {
        Counts {
            stripes: std::array::from_fn(|_| Stripe(std::array::from_fn(|_| AtomicU64::new(0)))),
            rare: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds `n` to striped counter `i` (< 8).
    #[inline]
    pub(crate) fn add(&self, i: usize, n: u64) {
        let s = slot();
        let c = &self.stripes[s].0[i];
        if s == SHARED {
            c.fetch_add(n, Ordering::Relaxed);
        } else {
            // Only this thread writes this stripe: no read-modify-write needed.
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Adds `n` to rare counter `i` (< T).
    #[inline]
    pub(crate) fn add_rare(&self, i: usize, n: u64) {
        self.rare[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Striped counter `i`, summed over the stripes.
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.0[i].load(Ordering::Relaxed)))
    }

    /// Rare counter `i`.
    pub(crate) fn get_rare(&self, i: usize) -> u64 {
        self.rare[i].load(Ordering::Relaxed)
    }
}

/// A counter block allocated on first read: one pointer in its owner until then.
pub(crate) struct LazyCounts<const T: usize> {
    block: OnceBox<Counts<T>>,
}

impl<const T: usize> LazyCounts<T> {
    pub(crate) const fn new() -> Self {
        LazyCounts {
            block: OnceBox::new(),
        }
    }

    /// The block, if counting has started.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Counts<T>> {
        self.block.get()
    }

    /// The block, allocating it (and so starting to count) on first use. Two first callers
    /// racing both allocate; one block is kept and the other freed at once.
    pub(crate) fn enable(&self) -> &Counts<T> {
        self.block.get_or_init(|| Box::new(Counts::new()))
    }
}

impl<const T: usize> Default for LazyCounts<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const T: usize> std::fmt::Debug for LazyCounts<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() {
            "counting"
        } else {
            "not counting"
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_from_many_threads_add_up_exactly() {
        // More threads than owned stripes, so the shared stripe's atomic path is used too.
        let lazy = Arc::new(LazyCounts::<2>::new());
        assert!(lazy.get().is_none());
        let c = lazy.enable();
        c.add(3, 1);
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let lazy = Arc::clone(&lazy);
                std::thread::spawn(move || {
                    let c = lazy.get().unwrap();
                    for _ in 0..10_000 {
                        c.add(3, 1);
                        c.add_rare(1, 2);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = lazy.get().unwrap();
        assert_eq!(c.get(3), 200_001);
        assert_eq!(c.get(0), 0);
        assert_eq!(c.get_rare(1), 400_000);
        assert_eq!(c.get_rare(0), 0);
    }

    #[test]
    fn slot_is_one_pointer() {
        assert_eq!(std::mem::size_of::<LazyCounts<11>>(), 8);
    }

    #[test]
    fn racing_first_reads_share_one_block_and_drop_frees_it() {
        // Under Miri: the losing block freed once, the kept one freed on drop (a leak or a
        // double free fails the run), no data race.
        let lazy = Arc::new(LazyCounts::<1>::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lazy = Arc::clone(&lazy);
                std::thread::spawn(move || {
                    let c = lazy.enable();
                    c.add(0, 1);
                    c.add_rare(0, 1);
                    c as *const Counts<1> as usize
                })
            })
            .collect();
        let blocks: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let kept = lazy.get().unwrap() as *const Counts<1> as usize;
        assert!(blocks.iter().all(|&b| b == kept), "one block for every caller");
        assert_eq!(lazy.get().unwrap().get(0), 4);
        assert_eq!(lazy.get().unwrap().get_rare(0), 4);
        drop(Arc::into_inner(lazy).unwrap());
    }

    #[test]
    fn an_unread_slot_counts_nothing_and_drops_clean() {
        let lazy = LazyCounts::<1>::new();
        assert!(lazy.get().is_none());
        drop(lazy);
    }
}
