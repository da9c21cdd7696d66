// Options objects as the neutral JSON configuration the core parses: the core validates every
// value and names the field of the first invalid one, exactly as the conformance suite spells it.
// Defaults come from the core (CoreDefaults), never restated here. The writer remembers
// which C# property each field came from, so that a refusal is told in the caller's terms (a
// TimeSpan, the property's name) rather than in the JSON's milliseconds.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text.RegularExpressions;

namespace Holdoff
{
    /// <summary>Writes options objects as one neutral JSON configuration and builds from it.</summary>
    internal sealed class ConfigJson
    {
        readonly List<string> parts = new List<string>();
        // Core field (breaker.open_interval.initial) -> the C# property and the value it held.
        readonly Dictionary<string, KeyValuePair<string, object>> sources = new Dictionary<string, KeyValuePair<string, object>>();

        static string Num(double v)
        {
            if (double.IsNaN(v)) return "\"NaN\"";
            if (double.IsPositiveInfinity(v)) return "\"Infinity\"";
            if (double.IsNegativeInfinity(v)) return "\"-Infinity\"";
            return v.ToString("R", CultureInfo.InvariantCulture);
        }

        /// <summary>A TimeSpan as the neutral format's float milliseconds.</summary>
        internal static string Ms(TimeSpan d) { return Num(d.Ticks / (double)TimeSpan.TicksPerMillisecond); }

        /// <summary>One JSON member: <paramref name="field"/> is the core's name, written with
        /// <paramref name="key"/>; <paramref name="property"/> the C# name of its source.</summary>
        string Member(string field, string key, string property, object value, string json)
        {
            sources[field] = new KeyValuePair<string, object>(property, value);
            return "\"" + key + "\":" + json;
        }

        string Span(string part, string leaf, string property, TimeSpan v)
        {
            return Member(part + "." + leaf, leaf + "_ms", property, v, Ms(v));
        }

        string Count(string part, string leaf, string property, long v)
        {
            return Member(part + "." + leaf, leaf, property, v, v.ToString(CultureInfo.InvariantCulture));
        }

        string Real(string part, string leaf, string property, double v)
        {
            return Member(part + "." + leaf, leaf, property, v, Num(v));
        }

        string Backoff(string part, string property, BackoffOptions b)
        {
            return "{" + string.Join(",", new[]
            {
                Span(part, "initial", property + ".Initial", b.Initial),
                Real(part, "multiplier", property + ".Multiplier", b.Multiplier),
                Span(part, "max", property + ".Max", b.Max),
                Real(part, "jitter", property + ".Jitter", b.Jitter),
            }) + "}";
        }

        string Statuses(string leaf, string property, int[] v)
        {
            var items = new List<string>();
            foreach (var x in v) items.Add(x.ToString(CultureInfo.InvariantCulture));
            return Member("classifier." + leaf, leaf, property, string.Join(", ", items), "[" + string.Join(",", items) + "]");
        }

        public ConfigJson Breaker(BreakerOptions b)
        {
            const string P = "breaker";
            var t = b.Trip;
            var trip = new List<string>();
            if (t.Kind == "rate")
            {
                trip.Add(Real(P + ".trip", "threshold", "TripPolicy.FailureRate(rate)", t.Rate));
                trip.Add(Count(P + ".trip", "min_calls", "TripPolicy.FailureRate(minCalls)", t.MinCalls));
                trip.Add(Span(P + ".trip", "window", "TripPolicy.FailureRate(window)", t.Window));
                if (t.Buckets != 0) trip.Add(Count(P + ".trip", "buckets", "TripPolicy.FailureRate(buckets)", t.Buckets));
            }
            else
            {
                string factory = t.Kind == "window" ? "TripPolicy.FailuresInWindow" : "TripPolicy.ConsecutiveFailures";
                trip.Add(Count(P + ".trip", "threshold", factory + "(n)", t.Threshold));
                if (t.Kind == "window") trip.Add(Span(P + ".trip", "window", factory + "(window)", t.Window));
            }
            var f = new List<string>
            {
                "\"trip\":{\"policy\":\"" + t.Kind + "\"," + string.Join(",", trip) + "}",
                "\"open_interval\":" + Backoff(P + ".open_interval", "BreakerOptions.OpenInterval", b.OpenInterval),
                Count(P, "recoveries", "BreakerOptions.Recoveries", b.Recoveries),
                Count(P, "max_probes_in_flight", "BreakerOptions.MaxProbesInFlight", b.MaxProbesInFlight),
                Span(P, "max_retry_later", "BreakerOptions.MaxRetryLater", b.MaxRetryLater),
                Member(P + ".seed", "seed", "BreakerOptions.Seed", b.Seed, b.Seed.ToString(CultureInfo.InvariantCulture)),
            };
            if (b.ProbeTimeout.HasValue) f.Add(Span(P, "probe_timeout", "BreakerOptions.ProbeTimeout", b.ProbeTimeout.Value));
            parts.Add("\"breaker\":{" + string.Join(",", f) + "}");
            if (b.Fleet != null) Fleet(b.Fleet);
            return this;
        }

        void Fleet(FleetOptions o)
        {
            const string P = "fleet";
            var f = new List<string>
            {
                Member(P + ".url", "url", "FleetOptions.Url", o.Url, Quote(o.Url)),
                Member(P + ".key", "key", "FleetOptions.Key", o.Key, Quote(o.Key)),
            };
            if (o.Refresh.HasValue) f.Add(Span(P, "refresh", "FleetOptions.Refresh", o.Refresh.Value));
            if (o.FallbackAfter.HasValue) f.Add(Span(P, "fallback_after", "FleetOptions.FallbackAfter", o.FallbackAfter.Value));
            if (o.Timeout.HasValue) f.Add(Span(P, "timeout", "FleetOptions.Timeout", o.Timeout.Value));
            if (o.Ttl.HasValue) f.Add(Span(P, "ttl", "FleetOptions.Ttl", o.Ttl.Value));
            parts.Add("\"fleet\":{" + string.Join(",", f) + "}");
        }

        /// <summary>A JSON string (null for a null one, which the core refuses by name).</summary>
        static string Quote(string s)
        {
            if (s == null) return "null";
            var b = new System.Text.StringBuilder("\"");
            foreach (char ch in s)
            {
                if (ch == '"' || ch == '\\') b.Append('\\').Append(ch);
                else if (ch < ' ') b.AppendFormat(CultureInfo.InvariantCulture, "\\u{0:x4}", (int)ch);
                else b.Append(ch);
            }
            return b.Append('"').ToString();
        }

        public ConfigJson Budget(BudgetOptions g)
        {
            const string P = "budget";
            parts.Add("\"budget\":{" + string.Join(",", new[]
            {
                Span(P, "max_rate_limit_duration", "BudgetOptions.MaxRateLimitDuration", g.MaxRateLimitDuration),
                Span(P, "retry_after_cap", "BudgetOptions.RetryAfterCap", g.RetryAfterCap),
                Count(P, "max_retries", "BudgetOptions.MaxRetries", g.MaxRetries),
                "\"backoff\":" + Backoff(P + ".backoff", "BudgetOptions.Backoff", g.Backoff),
                Span(P, "max_backoff_duration", "BudgetOptions.MaxBackoffDuration", g.MaxBackoffDuration),
                "\"give_up_above_cap\":" + (g.GiveUpAboveCap ? "true" : "false"),
                Member(P + ".seed", "seed", "BudgetOptions.Seed", g.Seed, g.Seed.ToString(CultureInfo.InvariantCulture)),
            }) + "}");
            return this;
        }

        public ConfigJson Quota(QuotaOptions q)
        {
            const string P = "quota";
            parts.Add("\"quota\":{" + string.Join(",", new[]
            {
                Count(P, "capacity", "QuotaOptions.Capacity", q.Capacity),
                Count(P, "retry_cost", "QuotaOptions.RetryCost", q.RetryCost),
                Count(P, "timeout_cost", "QuotaOptions.TimeoutCost", q.TimeoutCost),
                Count(P, "success_refill", "QuotaOptions.SuccessRefill", q.SuccessRefill),
            }) + "}");
            return this;
        }

        public ConfigJson Classifier(ClassifierOptions c)
        {
            var f = new List<string>();
            if (c.FailureStatuses != null) f.Add(Statuses("failure_statuses", "ClassifierOptions.FailureStatuses", c.FailureStatuses));
            if (c.AnswerStatuses != null) f.Add(Statuses("answer_statuses", "ClassifierOptions.AnswerStatuses", c.AnswerStatuses));
            if (c.RetryAfterStatuses != null)
                f.Add(Statuses("retry_after_statuses", "ClassifierOptions.RetryAfterStatuses", c.RetryAfterStatuses));
            if (c.RateLimitDefaultWait.HasValue)
                f.Add(Span("classifier", "rate_limit_default_wait", "ClassifierOptions.RateLimitDefaultWait", c.RateLimitDefaultWait.Value));
            parts.Add("\"classifier\":{" + string.Join(",", f) + "}");
            return this;
        }

        /// <summary>The group part: <paramref name="maxKeys"/> null keeps the core's default.</summary>
        public ConfigJson Group(int? maxKeys)
        {
            if (maxKeys.HasValue) parts.Add("\"group\":{" + Count("group", "max_keys", "maxKeys", maxKeys.Value) + "}");
            return this;
        }

        /// <summary>The execute part: null or Timeout.InfiniteTimeSpan is no limit.</summary>
        public ConfigJson Execute(TimeSpan? attempt, TimeSpan? total)
        {
            parts.Add("\"execute\":{" + Limit("attempt_timeout", "Policy.AttemptTimeout", attempt) + ","
                + Limit("total_timeout", "Policy.TotalTimeout", total) + "}");
            return this;
        }

        string Limit(string leaf, string property, TimeSpan? v)
        {
            if (!v.HasValue || v.Value == System.Threading.Timeout.InfiniteTimeSpan) return "\"" + leaf + "_ms\":null";
            return Span("execute", leaf, property, v.Value);
        }

        public override string ToString() { return "{" + string.Join(",", parts) + "}"; }

        /// <summary>Parses the configuration and builds with it; a refusal of a value this writer
        /// wrote is rethrown in the caller's terms.</summary>
        public T Build<T>(Func<HoldoffConfig, T> make)
        {
            try
            {
                using (var c = HoldoffConfig.Parse(ToString()))
                    return make(c);
            }
            catch (InvalidConfigException e)
            {
                KeyValuePair<string, object> source;
                if (e.ParamName == null || !sources.TryGetValue(e.ParamName, out source)) throw;
                throw new InvalidConfigException(e.ParamName, InCallerTerms(e, source.Key, source.Value), e);
            }
        }

        // "must not be negative (milliseconds)": the unit of the JSON this writer made, not the
        // caller's; "budget 300s against a 300s cap": the core's own shorthand for durations.
        static readonly Regex JsonUnit = new Regex(@"\s*\((?:milliseconds|at most 2\^53-1 milliseconds)\)");
        static readonly Regex CoreDuration = new Regex(@"\b(\d+)(ms|s)\b");
        static readonly Regex FieldLeaf = new Regex(@"\b[a-z]+(?:_[a-z]+)*\b");

        /// <summary>The core's rule for the field, told with the C# property's name, durations as
        /// TimeSpans and the value the caller gave.</summary>
        string InCallerTerms(InvalidConfigException e, string property, object value)
        {
            string rule = e.Rule;
            rule = JsonUnit.Replace(rule, "");
            rule = CoreDuration.Replace(rule, m => Format(m.Groups[2].Value == "s"
                ? TimeSpan.FromSeconds(double.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture))
                : TimeSpan.FromMilliseconds(double.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture))));
            string part = e.ParamName.Substring(0, e.ParamName.LastIndexOf('.') + 1);
            rule = FieldLeaf.Replace(rule, m =>
            {
                KeyValuePair<string, object> sibling;
                return sources.TryGetValue(part + m.Value, out sibling) ? sibling.Key : m.Value;
            });
            return string.Format(CultureInfo.InvariantCulture, "holdoff: invalid configuration: {0} {1} (got {2}; field {3})",
                property, rule, Format(value), e.ParamName);
        }

        static string Format(object value)
        {
            if (value is TimeSpan) return ((TimeSpan)value).ToString("c", CultureInfo.InvariantCulture);
            if (value is double) return ((double)value).ToString("R", CultureInfo.InvariantCulture);
            return Convert.ToString(value, CultureInfo.InvariantCulture);
        }
    }
}
