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
//!   accept (RFC 9110 §5.6.7), parsed and validated (weekday included) by the `httpdate` crate.
//!   An RFC 850 two-digit year is read as the latest year with those digits that is not more than
//!   50 years in the future (RFC 9110 §5.6.7; `httpdate` alone pivots at 1970). Dates before
//!   1970, which `httpdate` cannot represent, are validated by shifting them whole 400-year
//!   Gregorian cycles forward and are in the past. The delay is the date minus the wall time of
//!   the decision's one clock reading, rounded up to the millisecond; a date in the past means
//!   now (a zero delay).
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
    if let Some(date) = http_date(s, wall_now) {
        let delay = match date {
            Some(at) => at
                .duration_since(wall_now)
                .map(ceil_millis)
                .unwrap_or(Duration::ZERO),
            None => Duration::ZERO,
        };
        // The same ceiling as delta-seconds, so every language sees the same number.
        return RetryAfter::Delay(delay.min(Duration::from_secs(MAX_SECONDS)));
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

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// An HTTP-date: `Some(Some(t))` for a date `httpdate` can represent, `Some(None)` for a valid
/// date before 1970 (in the past, whatever now is), `None` if `s` is not an HTTP-date.
fn http_date(s: &str, wall_now: SystemTime) -> Option<Option<SystemTime>> {
    // Every HTTP-date is ASCII; checking first keeps the byte slicing below on char boundaries.
    if !s.is_ascii() {
        return None;
    }
    if let Some(imf) = rfc850_as_imf(s, wall_now) {
        return httpdate::parse_http_date(&imf).ok().map(Some);
    }
    if let Ok(t) = httpdate::parse_http_date(s) {
        return Some(Some(t));
    }
    // IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT` (year at 12..16) or asctime
    // `Sun Nov  6 08:49:37 1994` (year at 20..24) with a year before 1970: the Gregorian
    // calendar repeats every 400 years (weekdays included), so the shifted date validates the
    // original one.
    let year_at = match (s.len(), s.as_bytes().get(3)) {
        (29, Some(b',')) => 12,
        (24, Some(b' ')) => 20,
        _ => return None,
    };
    let year: u32 = s.get(year_at..year_at + 4)?.parse().ok()?;
    if year >= 1970 || !s[year_at..year_at + 4].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let shifted = year + 400 * (1970 - year).div_ceil(400);
    let candidate = format!("{}{shifted}{}", &s[..year_at], &s[year_at + 4..]);
    httpdate::parse_http_date(&candidate).ok().map(|_| None)
}

/// Rewrites an RFC 850 date (`Sunday, 06-Nov-94 08:49:37 GMT`) as an IMF-fixdate whose year
/// follows RFC 9110 §5.6.7: the latest year with those two digits that is not more than 50
/// years after `wall_now`.
fn rfc850_as_imf(s: &str, wall_now: SystemTime) -> Option<String> {
    let (weekday, rest) = s.split_once(", ")?;
    if !WEEKDAYS.contains(&weekday) || rest.len() != 22 || &rest[2..3] != "-" || &rest[6..7] != "-" {
        return None;
    }
    let yy: u32 = rest.get(7..9)?.parse().ok()?;
    // The year of `wall_now`, read through httpdate's formatter (it covers 1970..=9999).
    let now_secs = wall_now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    if now_secs >= 253_402_300_800 {
        return None;
    }
    let now_year: u32 = httpdate::fmt_http_date(wall_now).get(12..16)?.parse().ok()?;
    let limit = now_year + 50;
    let mut year = limit - (limit % 100) + yy;
    if year > limit {
        year -= 100;
    }
    let imf = |y: u32| {
        format!(
            "{}, {} {} {y}{}",
            &weekday[..3],
            &rest[0..2],
            &rest[3..6],
            &rest[9..]
        )
    };
    if year == limit {
        // In the limit year itself, compare the instants: more than 50 years (of 365.2425 days)
        // ahead means the previous century.
        // The sender's weekday belongs to whichever century is right, so the instant in the limit
        // year is found without it: the one weekday that makes the date valid there.
        let fifty_years = Duration::from_secs(50 * 31_556_952);
        let in_limit_year = WEEKDAYS.iter().find_map(|wd| {
            let candidate = format!(
                "{}, {} {} {year}{}",
                &wd[..3],
                &rest[0..2],
                &rest[3..6],
                &rest[9..]
            );
            httpdate::parse_http_date(&candidate).ok()
        });
        if in_limit_year.is_some_and(|t| t.duration_since(wall_now).is_ok_and(|d| d > fifty_years)) {
            year -= 100;
        }
    }
    Some(imf(year))
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
                // The same ceiling as delta-seconds: a wall clock before 1970 would otherwise
                // push the delay past it.
                RetryAfter::Delay(
                    at.duration_since(wall_now)
                        .map(ceil_millis)
                        .unwrap_or(Duration::ZERO)
                        .min(Duration::from_secs(MAX_SECONDS)),
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

    #[test]
    fn x_ratelimit_reset_saturates_with_a_wall_clock_before_1970() {
        // A saturated epoch minus a wall time before 1970 still stops at MAX_SECONDS
        // (fuzz/regressions/retry_after/x_ratelimit_reset_before_1970_above_saturation).
        let before_1970 = UNIX_EPOCH - Duration::from_millis(1);
        let (hint, source) = hint_from_headers([("X-RateLimit-Reset", "9999999999")], before_1970);
        assert_eq!(source, HintSource::XRateLimitReset);
        assert_eq!(hint, RetryAfter::Delay(Duration::from_secs(MAX_SECONDS)));
    }
}
