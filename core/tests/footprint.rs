//! What one breaker costs inline: the bench reports it beside the peers' (bench/rust,
//! `bytes_per_breaker`), and this keeps it from growing unnoticed.

use holdoff::Breaker;

/// Exact, so that a field added, widened or padded fails here rather than in the bench.
#[cfg(target_pointer_width = "64")]
#[test]
fn a_breaker_is_88_bytes_inline() {
    // The word, the refusal deadline and count, the sequence counter and id, the clock (16),
    // the shared configuration, the seed, the lock with its lazily made state (16) and the
    // metrics slot (one pointer, null until the metrics are first read).
    assert_eq!(std::mem::size_of::<Breaker>(), 88);
}
