//! Retry-After (RFC 9110 §10.2.3) and rate-limit reset headers.
//!
//! `Retry-After = HTTP-date / delay-seconds`. Parsing never fails with an error or a panic:
//! anything that is not a usable hint is [`RetryAfter::Unusable`] with the reason, and the
//! caller falls back to its default wait (a hot loop on garbage is the classic bug).
//!
//! Rules, each pinned by a conformance case:
//! * delay-seconds: ASCII digits, optional surrounding whitespace (SP / HTAB, RFC 9110 §5.6.3).
//!   Values past [`MAX_SECONDS`] saturate to it; the retry budget then applies its cap and says so.
//! * Decimal seconds (`1.5`, `299.997`) are not RFC syntax but are sent by real servers; holdoff
//!   accepts them and rounds **up** to the millisecond, so it never waits less than asked.
//! * HTTP-date: IMF-fixdate, and the obsolete RFC 850 and asctime forms, which a recipient must
//!   accept (RFC 9110 §5.6.7), parsed by the `httpdate` crate (its two-digit-year pivot is 1970,
//!   which agrees with the RFC's 50-year rule for every year it can represent after 2026).
//!   The delay is the date minus the wall time of the decision's one clock reading, rounded up to
//!   the millisecond; a date in the past means now (a zero delay).
//! * A zero delay is returned as such; the retry budget and breaker decide what zero means
//!   (incident 3: not a usable rate-limit hint).
//! * Signs, garbage, and several values that disagree (`120, 60`, or two fields) are unusable.
//!   Commas are never split inside an HTTP-date.
//! * `RateLimit-Reset` (IETF draft, delta seconds) and `X-RateLimit-Reset` (GitHub style, Unix
//!   epoch seconds) are read only when no Retry-After field is present.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Delta-seconds values saturate here (`u32::MAX` seconds, about 136 years): large enough that
/// every cap applies, small enough to be exact in every language's number type.
pub const MAX_SECONDS: u64 = u32::MAX as u64;

/// A parsed delay hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfter {
    /// Wait this long (may be zero: "now").
    Delay(Duration),
    /// Not a usable hint.
    Unusable(Unusable),
}

/// Why a hint is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    /// No header, or only whitespace.
    Missing,
    /// Not delay-seconds and not an HTTP-date.
    Malformed,
    /// A signed number (`-5`, `+5`).
    Signed,
    /// Several values that disagree.
    Conflicting,
}

impl Unusable {
    /// The stable name used by the conformance suite.
    pub fn name(self) -> &'static str {
        match self {
            Unusable::Missing => "missing",
            Unusable::Malformed => "malformed",
            Unusable::Signed => "signed",
            Unusable::Conflicting => "conflicting",
        }
    }
}

impl RetryAfter {
    /// The delay, if usable.
    pub fn delay(self) -> Option<Duration> {
        match self {
            RetryAfter::Delay(d) => Some(d),
            RetryAfter::Unusable(_) => None,
        }
    }
}

/// Which header a hint came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintSource {
    /// `Retry-After`.
    RetryAfter,
    /// `RateLimit-Reset` (delta seconds).
    RateLimitReset,
    /// `X-RateLimit-Reset` (epoch seconds).
    XRateLimitReset,
    /// No header carried a hint.
    None,
}

fn trim_ows(s: &str) -> &str {
    s.trim_matches(|c| c == ' ' || c == '\t')
}

fn ceil_millis(d: Duration) -> Duration {
    let ms = d.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

fn delta_seconds(s: &str) -> Option<RetryAfter> {
    if s.is_empty() {
        return None;
    }
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || frac.is_some_and(|f| !digits(f)) {
        if s.starts_with(['-', '+']) && digits(s[1..].split('.').next().unwrap_or("")) {
            return Some(RetryAfter::Unusable(Unusable::Signed));
        }
        return None;
    }
    let secs = int.trim_start_matches('0');
    let secs: u64 = if secs.len() > 10 {
        u64::MAX
    } else {
        secs.parse().unwrap_or(0)
    };
    if secs >= MAX_SECONDS {
        return Some(RetryAfter::Delay(Duration::from_secs(MAX_SECONDS)));
    }
    // Fraction: round up to the millisecond (never wait less than the server asked).
    let mut ms = secs * 1000;
    if let Some(f) = frac {
        let f = f.trim_end_matches('0');
        let head: String = f.chars().chain(std::iter::repeat('0')).take(3).collect();
        ms += head.parse::<u64>().unwrap_or(0);
        if f.len() > 3 {
            ms += 1;
        }
    }
    Some(RetryAfter::Delay(Duration::from_millis(ms)))
}

/// Parses one Retry-After field value. `wall_now` is the wall time of the decision's clock
/// reading, used only for HTTP-dates.
pub fn parse_retry_after(value: &str, wall_now: SystemTime) -> RetryAfter {
    let s = trim_ows(value);
    if s.is_empty() {
        return RetryAfter::Unusable(Unusable::Missing);
    }
    if let Some(r) = delta_seconds(s) {
        return r;
    }
    if let Ok(date) = httpdate::parse_http_date(s) {
        return RetryAfter::Delay(match date.duration_since(wall_now) {
            Ok(d) => ceil_millis(d),
            Err(_) => Duration::ZERO,
        });
    }
    if s.contains(',') {
        // A list of delta-seconds (an HTTP-date was tried whole above): usable only if all agree.
        return combine(s.split(',').map(|part| {
            let p = trim_ows(part);
            delta_seconds(p).unwrap_or(RetryAfter::Unusable(Unusable::Malformed))
        }));
    }
    RetryAfter::Unusable(Unusable::Malformed)
}

fn combine(values: impl Iterator<Item = RetryAfter>) -> RetryAfter {
    let mut seen: Option<RetryAfter> = None;
    for v in values {
        match (seen, v) {
            (_, RetryAfter::Unusable(u)) => return RetryAfter::Unusable(u),
            (None, v) => seen = Some(v),
            (Some(a), b) if a == b => {}
            _ => return RetryAfter::Unusable(Unusable::Conflicting),
        }
    }
    seen.unwrap_or(RetryAfter::Unusable(Unusable::Missing))
}

/// Reads the delay hint from response headers (names compared case-insensitively).
///
/// Every `Retry-After` field counts: several fields that agree give their value, fields that
/// disagree are [`Unusable::Conflicting`]. Without a `Retry-After` field, `RateLimit-Reset`
/// (delta seconds) and then `X-RateLimit-Reset` (Unix epoch seconds; a past epoch means now)
/// are tried.
pub fn hint_from_headers<'a, I>(headers: I, wall_now: SystemTime) -> (RetryAfter, HintSource)
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut retry_after: Option<RetryAfter> = None;
    let mut reset: Option<&str> = None;
    let mut x_reset: Option<&str> = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("retry-after") {
            let v = parse_retry_after(value, wall_now);
            retry_after = Some(match retry_after {
                None => v,
                Some(prev) => combine([prev, v].into_iter()),
            });
        } else if name.eq_ignore_ascii_case("ratelimit-reset") {
            reset.get_or_insert(value);
        } else if name.eq_ignore_ascii_case("x-ratelimit-reset") {
            x_reset.get_or_insert(value);
        }
    }
    if let Some(r) = retry_after {
        return (r, HintSource::RetryAfter);
    }
    if let Some(v) = reset {
        let r = delta_seconds(trim_ows(v)).unwrap_or(RetryAfter::Unusable(Unusable::Malformed));
        return (r, HintSource::RateLimitReset);
    }
    if let Some(v) = x_reset {
        let r = match delta_seconds(trim_ows(v)) {
            Some(RetryAfter::Delay(epoch)) => {
                let at = UNIX_EPOCH.checked_add(epoch).unwrap_or(UNIX_EPOCH);
                RetryAfter::Delay(
                    at.duration_since(wall_now)
                        .map(ceil_millis)
                        .unwrap_or(Duration::ZERO),
                )
            }
            Some(u) => u,
            None => RetryAfter::Unusable(Unusable::Malformed),
        };
        return (r, HintSource::XRateLimitReset);
    }
    (RetryAfter::Unusable(Unusable::Missing), HintSource::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        // 2019-06-03 11:00:00 UTC, urllib3's test "now".
        UNIX_EPOCH + Duration::from_secs(1_559_559_600)
    }

    fn ms(v: &str) -> Option<u128> {
        parse_retry_after(v, now()).delay().map(|d| d.as_millis())
    }

    #[test]
    fn forms() {
        assert_eq!(ms("3600"), Some(3_600_000));
        assert_eq!(ms(" \t42 "), Some(42_000));
        assert_eq!(ms("Mon, 03 Jun 2019 11:30:12 GMT"), Some(1_812_000));
        assert_eq!(ms("Monday, 03-Jun-19 11:30:12 GMT"), Some(1_812_000));
        assert_eq!(ms("Mon Jun  3 11:30:12 2019"), Some(1_812_000));
        assert_eq!(ms("Mon, 03 Jun 2019 10:00:00 GMT"), Some(0));
        assert_eq!(ms("1.5"), Some(1_500));
        assert_eq!(ms("0.0001"), Some(1));
        assert_eq!(ms("99999999999999999999"), Some(u128::from(MAX_SECONDS) * 1000));
    }

    #[test]
    fn unusable() {
        let u = |v: &str| parse_retry_after(v, now());
        assert_eq!(u("-5"), RetryAfter::Unusable(Unusable::Signed));
        assert_eq!(u("+5"), RetryAfter::Unusable(Unusable::Signed));
        assert_eq!(u("soon"), RetryAfter::Unusable(Unusable::Malformed));
        assert_eq!(u(""), RetryAfter::Unusable(Unusable::Missing));
        assert_eq!(u("120, 60"), RetryAfter::Unusable(Unusable::Conflicting));
        assert_eq!(u("120, 120"), RetryAfter::Delay(Duration::from_secs(120)));
        assert_eq!(u("1."), RetryAfter::Unusable(Unusable::Malformed));
        assert_eq!(u("²"), RetryAfter::Unusable(Unusable::Malformed));
    }
}
