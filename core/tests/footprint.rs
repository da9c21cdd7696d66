//! What one breaker costs inline: the bench reports it beside the peers' (bench/rust,
//! `bytes_per_breaker`), and this keeps it from growing unnoticed.

use holdoff::Breaker;

/// Exact, so that a field added, widened or padded fails here rather than in the bench.
#[cfg(target_pointer_width = "64")]
#[test]
fn a_breaker_is_56_bytes_inline() {
    // The refusal block (the word, the refusal deadline and count, the sequence counter and
    // id: 32 bytes), the profile (one pointer to the configuration and clock it shares), the
    // seed, and the slot of the lock, locked state and metrics (one pointer, null until the
    // breaker first leaves the lock-free closed path).
    assert_eq!(std::mem::size_of::<Breaker>(), 56);
}
