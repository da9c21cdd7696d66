//! Retry-After (RFC 9110 §10.2.3) and RateLimit-Reset / X-RateLimit-Reset parsing.
//!
//! Input (UTF-8, lossily decoded): line 1 is one Retry-After field value; line 2, if present,
//! is the wall time of the decision in Unix milliseconds (may be negative: before 1970); every
//! further `Name: value` line is one more header for `hint_from_headers`.
//!
//! Beyond "never panics", each run checks:
//! * every delay is at most `MAX_SECONDS` (the documented saturation) and whole milliseconds;
//! * the same value and the same wall time give the same answer;
//! * a value made only of digits, dots and whitespace does not depend on the wall time;
//! * a usable delay round-trips through delta-seconds (`"S"`, `"S.mmm"`) and, for whole seconds,
//!   through the three HTTP-date forms; a date in the past is a zero delay;
//! * `"v, v"` equals `v` for delta-seconds; two equal Retry-After fields equal one; field names
//!   are case-insensitive; a Retry-After field hides RateLimit-Reset and X-RateLimit-Reset;
//! * RateLimit-Reset agrees with Retry-After delta-seconds; X-RateLimit-Reset is `epoch - now`
//!   rounded up to the millisecond;
//! * the default classifier turns a 429/503 into `retry_later(d)` exactly when the hint is a
//!   non-zero delay `d`.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use holdoff::retry_after::MAX_SECONDS;
use holdoff::{hint_from_headers, parse_retry_after, Classifier, HintSource, Outcome, RetryAfter, Unusable};
use libfuzzer_sys::fuzz_target;

/// urllib3's test "now", 2019-06-03 11:00:00 UTC.
const DEFAULT_WALL_MS: i64 = 1_559_559_600_000;
/// Keeps `UNIX_EPOCH ± wall` representable (and every HTTP-date computation in range).
const WALL_LIMIT_MS: i64 = 1 << 48;
/// 9999-12-31 23:59:59 UTC + 1 s: httpdate formats nothing from here on.
const YEAR_10000: u64 = 253_402_300_800;

fn wall_from_ms(ms: i64) -> SystemTime {
    let ms = ms.clamp(-WALL_LIMIT_MS, WALL_LIMIT_MS);
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

fn check_delay(what: &str, r: RetryAfter) {
    if let RetryAfter::Delay(d) = r {
        assert!(
            d <= Duration::from_secs(MAX_SECONDS),
            "{what}: delay {d:?} above the saturation of {MAX_SECONDS} s"
        );
        assert_eq!(
            d.subsec_nanos() % 1_000_000,
            0,
            "{what}: delay {d:?} not whole milliseconds"
        );
    }
}

fn numeric_text(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || b == b'.' || b == b' ' || b == b'\t')
}

fn ceil_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX))
}

/// An IMF-fixdate rewritten as asctime (`Sun Nov  6 08:49:37 1994`).
fn imf_to_asctime(imf: &str) -> String {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let day: u32 = imf[5..7].parse().unwrap();
    format!(
        "{} {} {:>2} {} {}",
        &imf[0..3],
        &imf[8..11],
        day,
        &imf[17..25],
        &imf[12..16]
    )
}

/// An IMF-fixdate rewritten as RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`).
fn imf_to_rfc850(imf: &str) -> String {
    let long = match &imf[0..3] {
        "Mon" => "Monday",
        "Tue" => "Tuesday",
        "Wed" => "Wednesday",
        "Thu" => "Thursday",
        "Fri" => "Friday",
        "Sat" => "Saturday",
        _ => "Sunday",
    };
    format!(
        "{long}, {}-{}-{} {}",
        &imf[5..7],
        &imf[8..11],
        &imf[14..16],
        &imf[17..29]
    )
}

fn round_trips(d: Duration, wall: SystemTime) {
    if d >= Duration::from_secs(MAX_SECONDS) {
        return;
    }
    let ms = d.as_millis();
    let same = |v: &str| {
        let back = parse_retry_after(v, wall);
        assert_eq!(back, RetryAfter::Delay(d), "{v:?} does not round-trip {d:?}");
    };
    same(&format!("{}.{:03}", ms / 1000, ms % 1000));
    if ms % 1000 != 0 {
        return;
    }
    same(&format!("{}", ms / 1000));
    same(&format!("\t{} ", ms / 1000));
    // HTTP-dates need a whole-second wall time inside httpdate's range.
    let Ok(since) = wall.duration_since(UNIX_EPOCH) else {
        return;
    };
    if since.subsec_nanos() != 0 || since.as_secs() + d.as_secs() >= YEAR_10000 {
        return;
    }
    let imf = httpdate::fmt_http_date(wall + d);
    same(&imf);
    same(&imf_to_asctime(&imf));
    // An RFC 850 year is read within 50 years of now: only short delays round-trip.
    if d < Duration::from_secs(40 * 365 * 86_400) {
        same(&imf_to_rfc850(&imf));
    }
    // A date in the past means now.
    if since.as_secs() > d.as_secs() + 1 {
        let past = httpdate::fmt_http_date(wall - d - Duration::from_secs(1));
        assert_eq!(
            parse_retry_after(&past, wall),
            RetryAfter::Delay(Duration::ZERO),
            "{past:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let value = lines.next().unwrap_or("");
    let wall_ms = lines
        .next()
        .and_then(|l| l.trim().parse::<i64>().ok())
        .unwrap_or(DEFAULT_WALL_MS);
    let wall = wall_from_ms(wall_ms);
    let extra: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(':')).take(16).collect();

    let r = parse_retry_after(value, wall);
    check_delay("parse_retry_after", r);
    assert_eq!(
        r,
        parse_retry_after(value, wall),
        "not deterministic for {value:?}"
    );
    if numeric_text(value) {
        let other = wall_from_ms(wall_ms.wrapping_add(86_400_000 * 365 * 7 + 12_345));
        assert_eq!(
            r,
            parse_retry_after(value, other),
            "{value:?} depends on the wall time"
        );
        if let RetryAfter::Delay(_) = r {
            assert_eq!(
                parse_retry_after(&format!("{value}, {value}"), wall),
                r,
                "{value:?} twice"
            );
        }
    }
    if trimmed_empty(value) {
        assert_eq!(r, RetryAfter::Unusable(Unusable::Missing));
    }
    if let RetryAfter::Delay(d) = r {
        round_trips(d, wall);
    }

    // Header lookup.
    let (h, src) = hint_from_headers([("Retry-After", value)], wall);
    assert_eq!((h, src), (r, HintSource::RetryAfter));
    assert_eq!(hint_from_headers([("rEtRy-AfTeR", value)], wall).0, r);
    assert_eq!(
        hint_from_headers([("Retry-After", value), ("retry-after", value)], wall).0,
        r
    );
    assert_eq!(
        hint_from_headers(
            [
                ("RateLimit-Reset", "1"),
                ("Retry-After", value),
                ("X-RateLimit-Reset", "2")
            ],
            wall
        ),
        (r, HintSource::RetryAfter)
    );
    let (rl, src) = hint_from_headers([("RateLimit-Reset", value)], wall);
    assert_eq!(src, HintSource::RateLimitReset);
    check_delay("RateLimit-Reset", rl);
    if let RetryAfter::Delay(_) = rl {
        assert_eq!(rl, r, "RateLimit-Reset and Retry-After disagree on {value:?}");
    }
    let (xr, src) = hint_from_headers([("X-RateLimit-Reset", value)], wall);
    assert_eq!(src, HintSource::XRateLimitReset);
    check_delay("X-RateLimit-Reset", xr);
    if let (RetryAfter::Delay(epoch), RetryAfter::Delay(d)) = (rl, xr) {
        let at = UNIX_EPOCH + epoch;
        let want = at
            .duration_since(wall)
            .map(ceil_ms)
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_secs(MAX_SECONDS));
        assert_eq!(d, want, "X-RateLimit-Reset {value:?} at wall {wall_ms} ms");
    }
    if !extra.is_empty() {
        let (x, _) = hint_from_headers(extra.iter().copied(), wall);
        check_delay("extra headers", x);
    }

    // Classification of the hint.
    let classifier = Classifier::default();
    for status in [429u16, 503] {
        let c = classifier
            .classify(status, [("Retry-After", value)], wall)
            .unwrap();
        match r {
            RetryAfter::Delay(d) if !d.is_zero() => assert_eq!(c.outcome, Outcome::RetryLater(d)),
            _ => assert_eq!(c.outcome, Outcome::Failure, "{status} with {value:?}"),
        }
    }
    let ok = classifier.classify(200, [("Retry-After", value)], wall).unwrap();
    assert_eq!(ok.outcome, Outcome::Success);
});

fn trimmed_empty(s: &str) -> bool {
    s.bytes().all(|b| b == b' ' || b == b'\t')
}
