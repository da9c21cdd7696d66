//! Errors in the caller's terms. The core validates in the milliseconds of its neutral
//! configuration format and names fields as the conformance suite does
//! (`breaker.open_interval.initial`); a Kotlin caller wrote `BreakerConfig(openInterval =
//! BackoffConfig(initial = (-1).seconds))`. So the rule an error carries is reworded here: the
//! field as Kotlin spells it (the core's name in camelCase, on its record), no milliseconds,
//! and durations as `kotlin.time.Duration.toString()` prints them. The error's `field` keeps
//! the core's name, which programs compare.

use std::time::Duration as StdDuration;

/// The Kotlin records of the configuration's parts, by the part's name in the core.
fn record_of(part: &str) -> Option<&'static str> {
    Some(match part {
        "breaker" => "BreakerConfig",
        "budget" => "BudgetConfig",
        "quota" => "QuotaConfig",
        "classifier" => "ClassifierConfig",
        "execute" => "ExecutionConfig",
        "fleet" => "FleetConfig",
        _ => return None,
    })
}

/// `max_rate_limit_duration` -> `maxRateLimitDuration`.
fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    for (i, word) in snake.split('_').enumerate() {
        let mut chars = word.chars();
        match chars.next() {
            Some(c) if i > 0 => out.extend(c.to_uppercase().chain(chars)),
            Some(c) => out.extend(std::iter::once(c).chain(chars)),
            None => {}
        }
    }
    out
}

/// The Kotlin name of the core's field: `breaker.open_interval.initial` ->
/// `BreakerConfig.openInterval.initial`, `group.max_keys` -> `maxKeys` (a constructor's
/// parameter), `fleet.fallback_after` -> `FleetConfig.fallbackAfter`, `fleet` alone -> `fleet`
/// (the parameter), `outcome.retry_later` -> `Outcome.RetryLater.delay`. A field without a Kotlin
/// counterpart (`at`, `status`: already the parameter's name) keeps the core's name.
pub(crate) fn kotlin_field(field: &str) -> String {
    let mut parts = field.split('.');
    let head = parts.next().unwrap_or_default();
    let rest: Vec<String> = parts.map(camel).collect();
    match record_of(head) {
        _ if field == "fleet" => field.to_owned(),
        Some(record) => std::iter::once(record.to_owned())
            .chain(rest)
            .collect::<Vec<_>>()
            .join("."),
        None if head == "group" => rest.join("."),
        None if field == "outcome.retry_later" => "Outcome.RetryLater.delay".to_owned(),
        None => field.to_owned(),
    }
}

/// A duration as Kotlin's `Duration.toString()` prints it: `0s`, `500ms`, `1.5s`, `5m`,
/// `1h 0m 30s`, `104249991d 8h 59m 0.991s`; `negative` prefixes `-` (with parentheses
/// around several components, as Kotlin does).
pub(crate) fn kotlin_duration(d: StdDuration, negative: bool) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    let secs = d.as_secs();
    let (days, hours, minutes, seconds) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
    let nanos = d.subsec_nanos();
    let (has_days, has_hours, has_minutes) = (days != 0, hours != 0, minutes != 0);
    let has_seconds = seconds != 0 || nanos != 0;
    let mut parts = Vec::new();
    if has_days {
        parts.push(format!("{days}d"));
    }
    if has_hours || (has_days && (has_minutes || has_seconds)) {
        parts.push(format!("{hours}h"));
    }
    if has_minutes || (has_seconds && (has_hours || has_days)) {
        parts.push(format!("{minutes}m"));
    }
    if has_seconds {
        parts.push(if seconds != 0 || has_days || has_hours || has_minutes {
            fractional(seconds, nanos, 9, "s")
        } else if nanos >= 1_000_000 {
            fractional(u64::from(nanos / 1_000_000), nanos % 1_000_000, 6, "ms")
        } else if nanos >= 1_000 {
            fractional(u64::from(nanos / 1_000), nanos % 1_000, 3, "us")
        } else {
            format!("{nanos}ns")
        });
    }
    let text = parts.join(" ");
    match (negative, parts.len()) {
        (false, _) => text,
        (true, 1) => format!("-{text}"),
        (true, _) => format!("-({text})"),
    }
}

/// Kotlin's `appendFractional` without ISO zeroes: the fraction's significant digits, or whole
/// groups of three once there are three or more.
fn fractional(whole: u64, fraction: u32, size: usize, unit: &str) -> String {
    if fraction == 0 {
        return format!("{whole}{unit}");
    }
    let digits = format!("{fraction:0size$}");
    let significant = digits.trim_end_matches('0').len();
    let keep = if significant < 3 {
        significant
    } else {
        significant.div_ceil(3) * 3
    };
    format!("{whole}.{}{unit}", &digits[..keep])
}

/// The core's durations in a rule (`60s`, `1500ms`) as Kotlin prints them.
fn kotlin_durations(rule: &str) -> String {
    let mut out = String::with_capacity(rule.len());
    for (i, word) in rule.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &word[digits.len()..];
        let d = match (digits.parse::<u64>(), unit) {
            (Ok(n), "s") => Some(StdDuration::from_secs(n)),
            (Ok(n), "ms") => Some(StdDuration::from_millis(n)),
            _ => None,
        };
        match d {
            Some(d) if !digits.is_empty() => out.push_str(&kotlin_duration(d, false)),
            _ => out.push_str(word),
        }
    }
    out
}

/// The core's rule about `field`, for a Kotlin caller: `BreakerConfig.openInterval.initial must
/// not be negative`.
pub(crate) fn kotlin_rule(field: &str, rule: &str) -> String {
    let largest = kotlin_duration(
        StdDuration::from_millis(holdoff::interop::units::MAX_MILLIS),
        false,
    );
    let mut rule = rule
        .replace(" (milliseconds)", "")
        .replace("a finite number of milliseconds", "finite")
        .replace("a number of milliseconds", "a duration")
        .replace("2^53-1 milliseconds", &largest)
        .replace("the window in nanoseconds", "window.inWholeNanoseconds");
    rule = kotlin_durations(&rule);
    // Fields of the same part that the rule names (`retry_after_cap`, `initial`).
    let part = field.rsplit_once('.').map_or("", |(p, _)| p);
    let top = field.split('.').next().unwrap_or_default();
    if rule.contains("retry_after_cap") {
        rule = rule.replace(
            "retry_after_cap",
            &kotlin_field(&format!("{top}.retry_after_cap")),
        );
    }
    if let Some(head) = rule.strip_suffix(">= initial") {
        rule = format!("{head}>= {}", kotlin_field(&format!("{part}.initial")));
    }
    format!("{} {rule}", kotlin_field(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> StdDuration {
        StdDuration::from_millis(n)
    }

    #[test]
    fn durations_print_as_kotlin_prints_them() {
        for (d, negative, kotlin) in [
            (ms(0), false, "0s"),
            (ms(500), false, "500ms"),
            (ms(1500), false, "1.5s"),
            (ms(1234), false, "1.234s"),
            (ms(300_000), false, "5m"),
            (ms(3_630_000), false, "1h 0m 30s"),
            (StdDuration::from_nanos(1_500), false, "1.5us"),
            (StdDuration::from_nanos(12), false, "12ns"),
            (StdDuration::from_nanos(1_000_000_001), false, "1.000000001s"),
            (ms(1000), true, "-1s"),
            (ms(90_000), true, "-(1m 30s)"),
            (
                ms(holdoff::interop::units::MAX_MILLIS),
                false,
                "104249991d 8h 59m 0.991s",
            ),
        ] {
            assert_eq!(kotlin_duration(d, negative), kotlin, "{d:?}");
        }
    }

    #[test]
    fn rules_name_kotlin_fields_without_milliseconds() {
        assert_eq!(
            kotlin_rule(
                "breaker.open_interval.initial",
                "must not be negative (milliseconds)"
            ),
            "BreakerConfig.openInterval.initial must not be negative"
        );
        assert_eq!(
            kotlin_rule(
                "budget.max_rate_limit_duration",
                "budget 300s against a 300s cap leaves no room to retry: it must be at least twice \
                 retry_after_cap (room for two capped waits)"
            ),
            "BudgetConfig.maxRateLimitDuration budget 5m against a 5m cap leaves no room to retry: it \
             must be at least twice BudgetConfig.retryAfterCap (room for two capped waits)"
        );
        assert_eq!(
            kotlin_rule("budget.backoff.max", "must be >= initial"),
            "BudgetConfig.backoff.max must be >= BudgetConfig.backoff.initial"
        );
        assert_eq!(
            kotlin_rule("at", "is too large (at most 2^53-1 milliseconds)"),
            "at is too large (at most 104249991d 8h 59m 0.991s)"
        );
        assert_eq!(kotlin_field("group.max_keys"), "maxKeys");
        assert_eq!(
            kotlin_field("execute.total_timeout"),
            "ExecutionConfig.totalTimeout"
        );
        assert_eq!(kotlin_field("policy.clock"), "policy.clock");
        assert_eq!(kotlin_field("fleet.fallback_after"), "FleetConfig.fallbackAfter");
        assert_eq!(kotlin_field("fleet"), "fleet");
    }
}
