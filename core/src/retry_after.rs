//! Retry-After (RFC 9110 §10.2.3) and the other delay headers providers send.
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
//!
//! [`hint_from_headers`] reads, in this order of precedence, the first of these fields that is
//! present (a present field is the hint even when unusable; later ones are then not read):
//! 1. `retry-after-ms` and 2. `x-ms-retry-after-ms`: milliseconds, decimals rounded up (sent by
//!    large LLM API providers and Azure services; more precise than Retry-After, which they
//!    accompany);
//! 3. `Retry-After`;
//! 4. `RateLimit`: the structured field (RFC 9651 list) of the IETF httpapi rate-limit draft,
//!    `"policy";r=0;t=30`: the largest `t` (seconds) among the policies whose remaining quota `r`
//!    is 0, or the smallest `t` when no policy says `r=0`; a field that does not parse, or has no
//!    integer `t >= 0`, is malformed;
//! 5. `RateLimit-Reset` (the draft's older form, delta seconds);
//! 6. `X-RateLimit-Reset` (GitHub style, Unix epoch seconds; a past epoch means now).
//!
//! Every value saturates at [`MAX_SECONDS`].

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
    /// `retry-after-ms` (milliseconds).
    RetryAfterMs,
    /// `x-ms-retry-after-ms` (milliseconds).
    XMsRetryAfterMs,
    /// `Retry-After`.
    RetryAfter,
    /// `RateLimit` (structured field, its `t` parameter).
    RateLimit,
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
    decimal(s, 3)
}

fn delta_millis(s: &str) -> Option<RetryAfter> {
    decimal(s, 0)
}

/// A non-negative decimal number of units of `10^unit_digits` milliseconds (3: seconds,
/// 0: milliseconds), rounded up to the millisecond and saturated at [`MAX_SECONDS`]. `None` if
/// `s` is not such a number; signed numbers are [`Unusable::Signed`].
fn decimal(s: &str, unit_digits: usize) -> Option<RetryAfter> {
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
    let max_ms = MAX_SECONDS * 1000;
    let unit = 10u64.pow(unit_digits as u32);
    let int = int.trim_start_matches('0');
    // More digits than any saturated value has: saturated whatever they say.
    if int.len() > 16 {
        return Some(RetryAfter::Delay(Duration::from_millis(max_ms)));
    }
    let mut ms = int.parse::<u64>().unwrap_or(0).saturating_mul(unit);
    // Fraction: the first `unit_digits` digits are whole milliseconds, anything after them
    // rounds up (never wait less than the server asked).
    if let Some(f) = frac {
        let f = f.trim_end_matches('0');
        let head: String = f
            .chars()
            .chain(std::iter::repeat('0'))
            .take(unit_digits)
            .collect();
        ms = ms.saturating_add(head.parse::<u64>().unwrap_or(0));
        if f.len() > unit_digits {
            ms = ms.saturating_add(1);
        }
    }
    Some(RetryAfter::Delay(Duration::from_millis(ms.min(max_ms))))
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

/// A field value of a millisecond header: one value, or several that agree.
fn parse_millis(value: &str) -> RetryAfter {
    let s = trim_ows(value);
    if s.is_empty() {
        return RetryAfter::Unusable(Unusable::Missing);
    }
    combine(
        s.split(',')
            .map(|part| delta_millis(trim_ows(part)).unwrap_or(RetryAfter::Unusable(Unusable::Malformed))),
    )
}

/// The `t` of a `RateLimit` structured field: the largest among the policies with `r=0`, else
/// the smallest.
fn parse_ratelimit(value: &str) -> RetryAfter {
    if trim_ows(value).is_empty() {
        return RetryAfter::Unusable(Unusable::Missing);
    }
    let Ok(list) = sfv::Parser::new(value).parse::<sfv::List>() else {
        return RetryAfter::Unusable(Unusable::Malformed);
    };
    let mut exhausted: Option<i64> = None;
    let mut any: Option<i64> = None;
    for entry in &list {
        let params = match entry {
            sfv::ListEntry::Item(item) => &item.params,
            sfv::ListEntry::InnerList(inner) => &inner.params,
        };
        let int = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .and_then(|(_, v)| v.as_integer())
                .map(i64::from)
        };
        let Some(t) = int("t").filter(|t| *t >= 0) else {
            continue;
        };
        any = Some(any.map_or(t, |a| a.min(t)));
        if int("r") == Some(0) {
            exhausted = Some(exhausted.map_or(t, |e| e.max(t)));
        }
    }
    match exhausted.or(any) {
        Some(t) => RetryAfter::Delay(Duration::from_secs((t as u64).min(MAX_SECONDS))),
        None => RetryAfter::Unusable(Unusable::Malformed),
    }
}

/// What the headers of one response say about retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeaderHints {
    pub(crate) hint: RetryAfter,
    pub(crate) source: HintSource,
    /// `x-should-retry: true` or `false` (the provider's explicit word); other values ignored.
    pub(crate) should_retry: Option<bool>,
}

// Field names in order of precedence; `Retry-After` may appear in several fields.
const PRECEDENCE: [(&str, HintSource); 6] = [
    ("retry-after-ms", HintSource::RetryAfterMs),
    ("x-ms-retry-after-ms", HintSource::XMsRetryAfterMs),
    ("retry-after", HintSource::RetryAfter),
    ("ratelimit", HintSource::RateLimit),
    ("ratelimit-reset", HintSource::RateLimitReset),
    ("x-ratelimit-reset", HintSource::XRateLimitReset),
];

pub(crate) fn scan_headers<'a, I>(headers: I, wall_now: SystemTime) -> HeaderHints
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    // Per source: every value, in order (several fields of one name are combined).
    let mut found: [Option<RetryAfter>; 6] = [None; 6];
    let mut ratelimit: Option<String> = None;
    let mut should_retry = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("x-should-retry") {
            match trim_ows(value) {
                v if v.eq_ignore_ascii_case("true") => should_retry = Some(true),
                v if v.eq_ignore_ascii_case("false") => should_retry = Some(false),
                _ => {}
            }
            continue;
        }
        let Some(i) = PRECEDENCE.iter().position(|(n, _)| name.eq_ignore_ascii_case(n)) else {
            continue;
        };
        let v = match PRECEDENCE[i].1 {
            HintSource::RetryAfterMs | HintSource::XMsRetryAfterMs => parse_millis(value),
            HintSource::RetryAfter => parse_retry_after(value, wall_now),
            HintSource::RateLimit => {
                // Several RateLimit fields form one list (RFC 9651 §3.1).
                let joined = ratelimit
                    .take()
                    .map_or_else(|| value.to_owned(), |p| format!("{p}, {value}"));
                let v = parse_ratelimit(&joined);
                ratelimit = Some(joined);
                found[i] = Some(v);
                continue;
            }
            HintSource::RateLimitReset => {
                delta_seconds(trim_ows(value)).unwrap_or(RetryAfter::Unusable(Unusable::Malformed))
            }
            _ => x_ratelimit_reset(value, wall_now),
        };
        found[i] = Some(match found[i] {
            None => v,
            Some(prev) => combine([prev, v].into_iter()),
        });
    }
    let (hint, source) = PRECEDENCE
        .iter()
        .zip(found)
        .find_map(|((_, src), v)| v.map(|v| (v, *src)))
        .unwrap_or((RetryAfter::Unusable(Unusable::Missing), HintSource::None));
    HeaderHints {
        hint,
        source,
        should_retry,
    }
}

fn x_ratelimit_reset(value: &str, wall_now: SystemTime) -> RetryAfter {
    match delta_seconds(trim_ows(value)) {
        Some(RetryAfter::Delay(epoch)) => {
            let at = UNIX_EPOCH.checked_add(epoch).unwrap_or(UNIX_EPOCH);
            // The same ceiling as delta-seconds: a wall clock before 1970 would otherwise push
            // the delay past it.
            RetryAfter::Delay(
                at.duration_since(wall_now)
                    .map(ceil_millis)
                    .unwrap_or(Duration::ZERO)
                    .min(Duration::from_secs(MAX_SECONDS)),
            )
        }
        Some(u) => u,
        None => RetryAfter::Unusable(Unusable::Malformed),
    }
}

/// Reads the delay hint from response headers (names compared case-insensitively), following
/// the precedence in the module documentation: the first field present is the hint, even when
/// it is unusable. Several fields of one name that agree give their value; fields that disagree
/// are [`Unusable::Conflicting`].
pub fn hint_from_headers<'a, I>(headers: I, wall_now: SystemTime) -> (RetryAfter, HintSource)
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let h = scan_headers(headers, wall_now);
    (h.hint, h.source)
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
