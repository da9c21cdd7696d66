//! Exponential backoff with a cap and seeded jitter.
//!
//! Used for the breaker's open interval (incident 2: 30 s doubling to a 5 min cap, **never**
//! giving up) and for the retry budget's counted path (incident 3: 500 ms doubling to 60 s).
//!
//! Order of operations, fixed because getting it wrong is a classic bug of retry libraries
//! (jitter applied before the cap, or jitter that can reach zero; `docs/contract.md` §4):
//! the un-jittered interval is `initial * multiplier^n`, **then** capped at `max`, **then**
//! jitter subtracts a random fraction of at most `jitter` of it. Jitter therefore never pushes
//! a wait past the cap, never makes callers cluster at the cap, and never gives 0 (jitter < 1).
//! Jittered values are rounded to whole milliseconds so every language sees the same numbers.

use std::time::Duration;

use crate::clock::duration_nanos;
use crate::error::ConfigError;

/// Exponential backoff: `min(initial * multiplier^n, max)`, minus up to `jitter` of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// First interval (n = 0). Must be > 0.
    pub initial: Duration,
    /// Growth factor per step, >= 1 (1 gives a constant interval). Finite.
    pub multiplier: f64,
    /// Cap on the un-jittered interval; >= `initial`.
    pub max: Duration,
    /// Fraction in `[0, 1)` of the interval that jitter may subtract; 0 disables jitter.
    pub jitter: f64,
}

impl Backoff {
    /// A constant interval (multiplier 1, no jitter).
    pub fn constant(interval: Duration) -> Self {
        Backoff {
            initial: interval,
            multiplier: 1.0,
            max: interval,
            jitter: 0.0,
        }
    }

    /// Exponential growth from `initial` by `multiplier` up to `max`, without jitter.
    pub fn exponential(initial: Duration, multiplier: f64, max: Duration) -> Self {
        Backoff {
            initial,
            multiplier,
            max,
            jitter: 0.0,
        }
    }

    /// The same backoff with jitter `fraction` in `[0, 1)`.
    pub fn with_jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// Checks every rule; `field` prefixes the error's field name.
    pub fn validate(&self, field: &str) -> Result<(), ConfigError> {
        if self.initial.is_zero() {
            return Err(ConfigError::new(
                format!("{field}.initial"),
                "must be greater than 0",
            ));
        }
        if !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return Err(ConfigError::new(
                format!("{field}.multiplier"),
                "must be a finite number >= 1",
            ));
        }
        if self.max < self.initial {
            return Err(ConfigError::new(format!("{field}.max"), "must be >= initial"));
        }
        if !self.jitter.is_finite() || !(0.0..1.0).contains(&self.jitter) {
            return Err(ConfigError::new(format!("{field}.jitter"), "must be in [0, 1)"));
        }
        Ok(())
    }

    /// The un-jittered, capped interval for step `n` (0-based). Saturates: huge `n` gives `max`.
    ///
    /// Computed in nanoseconds with IEEE basic operations only (see `pow_by_squaring`), then
    /// truncated to whole nanoseconds, so the result is the same on every platform.
    pub fn base(&self, n: u32) -> Duration {
        let initial = duration_nanos(self.initial) as f64;
        let max = duration_nanos(self.max);
        let grown = initial * pow_by_squaring(self.multiplier, n);
        if !grown.is_finite() || grown >= max as f64 {
            return self.max;
        }
        Duration::from_nanos(grown as u64).min(self.max)
    }

    /// The interval for step `n`, jittered with the next number of `rng` when jitter is on.
    /// The PRNG is only advanced when jitter is on, so unjittered schedules consume nothing.
    pub fn interval(&self, n: u32, rng: &mut Prng) -> Duration {
        let base = self.base(n);
        if self.jitter == 0.0 {
            return base;
        }
        let u = rng.next_f64();
        let nanos = duration_nanos(base) as f64 * (1.0 - self.jitter * u);
        let millis = (nanos / 1e6).round().max(1.0);
        Duration::from_millis(millis as u64)
    }
}

/// `base^exp` by binary exponentiation, using only IEEE multiplications (correctly rounded on
/// every platform). `f64::powi` is not used because its precision is unspecified: a platform, a
/// constant folder or an interpreter (Miri perturbs it by a few ULP on purpose) may return
/// `2.0^2` a few ULP below 4, and the truncation to whole nanoseconds then turns 120 s into
/// 119.999999999 s (119999 ms). The multiplications are those of compiler-rt's and libgcc's
/// `__powidf2`, the routine a natively compiled `powi` with a run-time exponent calls, in the
/// same order, so natively computed schedules are bit for bit what they were. Integer
/// multipliers give exact powers while they stay below 2^53. At most 32 squarings; overflow
/// gives infinity.
fn pow_by_squaring(mut base: f64, mut exp: u32) -> f64 {
    let mut result = 1.0;
    loop {
        if exp & 1 == 1 {
            result *= base;
        }
        exp >>= 1;
        if exp == 0 {
            return result;
        }
        base *= base;
    }
}

/// The core's own PRNG (SplitMix64): small, fast, seedable, and identical in every language
/// because every language runs this one implementation. Not for cryptography.
#[derive(Debug, Clone)]
pub struct Prng {
    state: u64,
}

impl Prng {
    /// A generator seeded with `seed`; the same seed gives the same sequence everywhere.
    pub fn new(seed: u64) -> Self {
        Prng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incident_two_schedule() {
        let b = Backoff::exponential(Duration::from_secs(30), 2.0, Duration::from_secs(300));
        let got: Vec<u64> = (0..7).map(|n| b.base(n).as_millis() as u64).collect();
        assert_eq!(got, [30_000, 60_000, 120_000, 240_000, 300_000, 300_000, 300_000]);
        assert_eq!(b.base(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn powers_are_exact_for_integer_multipliers_and_match_powi_natively() {
        assert_eq!(pow_by_squaring(2.0, 0), 1.0);
        assert_eq!(pow_by_squaring(2.0, 1), 2.0);
        assert_eq!(pow_by_squaring(3.0, 33), 5_559_060_566_555_523.0);
        assert_eq!(pow_by_squaring(2.0, 1024), f64::INFINITY);
        assert_eq!(pow_by_squaring(1.0, u32::MAX), 1.0);
        let b = Backoff::exponential(Duration::from_nanos(1), 3.0, Duration::MAX);
        assert_eq!(b.base(33), Duration::from_nanos(5_559_060_566_555_523));
        // Natively, powi is compiler-rt's __powidf2: the same multiplications in the same order,
        // so the schedules computed before and after this function are bit for bit the same.
        // Miri deliberately perturbs powi, so the comparison only holds outside it.
        #[cfg(not(miri))]
        for m in [1.0, 1.1, 1.5, 1.7, 2.0, 2.5, 3.0, std::f64::consts::E, 10.0] {
            for n in 0..70 {
                assert_eq!(
                    pow_by_squaring(m, n).to_bits(),
                    m.powi(std::hint::black_box(n as i32)).to_bits(),
                    "{m}^{n}"
                );
            }
        }
    }

    #[test]
    fn jitter_stays_within_bounds_and_is_reproducible() {
        let b = Backoff::exponential(Duration::from_secs(1), 2.0, Duration::from_secs(8)).with_jitter(0.5);
        let mut r1 = Prng::new(7);
        let mut r2 = Prng::new(7);
        for n in 0..20 {
            let d = b.interval(n, &mut r1);
            assert_eq!(d, b.interval(n, &mut r2));
            assert!(d <= b.base(n) && d >= b.base(n) / 2, "{d:?} at {n}");
        }
    }

    #[test]
    fn validation_names_the_field() {
        let mut b = Backoff::constant(Duration::from_secs(1));
        b.multiplier = 0.5;
        assert_eq!(b.validate("x").unwrap_err().field, "x.multiplier");
        b.multiplier = f64::NAN;
        assert!(b.validate("x").is_err());
        assert_eq!(
            Backoff::constant(Duration::ZERO).validate("x").unwrap_err().field,
            "x.initial"
        );
    }
}
