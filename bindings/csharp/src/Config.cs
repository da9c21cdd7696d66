// Options of every holdoff object, and the neutral JSON configuration they are sent as: the
// core's config module validates every value and names the field of the first invalid one,
// exactly as the conformance suite spells it. Defaults come from the C library's _init
// functions, never restated here.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>When a closed breaker trips.</summary>
    public sealed class TripPolicy
    {
        internal string Kind;
        internal int Threshold, MinCalls, Buckets;
        internal double Rate;
        internal TimeSpan Window;

        /// <summary><paramref name="n"/> failures in a row (1..1000000).</summary>
        public static TripPolicy ConsecutiveFailures(int n) { return new TripPolicy { Kind = "consecutive", Threshold = n }; }

        /// <summary><paramref name="n"/> failures inside a rolling window.</summary>
        public static TripPolicy FailuresInWindow(int n, TimeSpan window)
        {
            return new TripPolicy { Kind = "window", Threshold = n, Window = window };
        }

        /// <summary>Failure rate in (0, 1] over a rolling window of <paramref name="buckets"/>
        /// buckets (0 means 10), once <paramref name="minCalls"/> calls were seen.</summary>
        public static TripPolicy FailureRate(double rate, int minCalls, TimeSpan window, int buckets = 0)
        {
            return new TripPolicy { Kind = "rate", Rate = rate, MinCalls = minCalls, Window = window, Buckets = buckets };
        }
    }

    /// <summary>min(Initial * Multiplier^n, Max), minus up to Jitter (in [0, 1)) of it.</summary>
    public sealed class BackoffOptions
    {
        public TimeSpan Initial;
        public double Multiplier;
        public TimeSpan Max;
        public double Jitter;
    }

    /// <summary>Breaker options; a new instance holds the core's defaults.</summary>
    public sealed class BreakerOptions
    {
        public TripPolicy Trip;
        public BackoffOptions OpenInterval;
        public int Recoveries;
        public int MaxProbesInFlight;
        /// <summary>How long an unanswered probe holds its slot; TimeSpan.Zero means the interval.</summary>
        public TimeSpan ProbeTimeout;
        public TimeSpan MaxRetryLater;
        public ulong Seed;

        public BreakerOptions()
        {
            BreakerOptionsC o;
            Status.Check(Native.holdoff_breaker_options_init(out o));
            Trip = TripPolicy.ConsecutiveFailures((int)o.TripThreshold);
            OpenInterval = new BackoffOptions
            {
                Initial = Units.Span(o.OpenInitialNs), Multiplier = o.OpenMultiplier, Max = Units.Span(o.OpenMaxNs),
                Jitter = o.OpenJitter,
            };
            Recoveries = (int)o.Recoveries;
            MaxProbesInFlight = (int)o.MaxProbesInFlight;
            ProbeTimeout = Units.Span(o.ProbeTimeoutNs);
            MaxRetryLater = Units.Span(o.MaxRetryLaterNs);
            Seed = o.Seed;
        }
    }

    /// <summary>Retry budget options; a new instance holds the core's defaults.</summary>
    public sealed class BudgetOptions
    {
        public TimeSpan MaxRateLimitDuration;
        public TimeSpan RetryAfterCap;
        public int MaxRetries;
        public BackoffOptions Backoff;
        public TimeSpan MaxBackoffDuration;
        /// <summary>What to do when a server asks for longer than <see cref="RetryAfterCap"/>:
        /// false (the default) waits the cap and the decision says Capped; true gives up at once
        /// with <see cref="GiveUpReason.RetryAfterAboveCap"/> and the server's delay in
        /// ServerDelay (for callers who would rather reschedule than ask before the time the
        /// server named). Neutral configuration: budget.give_up_above_cap.</summary>
        public bool GiveUpAboveCap;
        public ulong Seed;

        public BudgetOptions()
        {
            BudgetOptionsC o;
            Status.Check(Native.holdoff_budget_options_init(out o));
            MaxRateLimitDuration = Units.Span(o.MaxRateLimitDurationNs);
            RetryAfterCap = Units.Span(o.RetryAfterCapNs);
            MaxRetries = (int)o.MaxRetries;
            Backoff = new BackoffOptions
            {
                Initial = Units.Span(o.BackoffInitialNs), Multiplier = o.BackoffMultiplier, Max = Units.Span(o.BackoffMaxNs),
                Jitter = o.BackoffJitter,
            };
            MaxBackoffDuration = Units.Span(o.MaxBackoffDurationNs);
            GiveUpAboveCap = o.GiveUpAboveCap != 0;
            Seed = o.Seed;
        }
    }

    /// <summary>Retry quota options in tokens; a new instance holds the core's defaults.</summary>
    public sealed class QuotaOptions
    {
        public long Capacity, RetryCost, TimeoutCost, SuccessRefill;

        public QuotaOptions()
        {
            QuotaOptionsC o;
            Status.Check(Native.holdoff_quota_options_init(out o));
            Capacity = (long)o.Capacity;
            RetryCost = (long)o.RetryCost;
            TimeoutCost = (long)o.TimeoutCost;
            SuccessRefill = (long)o.SuccessRefill;
        }
    }

    /// <summary>HTTP classifier overrides; null lists keep the defaults.</summary>
    public sealed class ClassifierOptions
    {
        public int[] FailureStatuses;
        public int[] AnswerStatuses;
        /// <summary>null means 429 and 503.</summary>
        public int[] RetryAfterStatuses;
        /// <summary>The wait for a 429 without a usable hint; null means none.</summary>
        public TimeSpan? RateLimitDefaultWait;
    }

    /// <summary>A policy's parts (Quota null: no quota).</summary>
    public sealed class PolicyOptions
    {
        public BreakerOptions Breaker = new BreakerOptions();
        public BudgetOptions Budget = new BudgetOptions();
        public QuotaOptions Quota;
        public ClassifierOptions Classifier = new ClassifierOptions();
    }

    /// <summary>Which parts a <see cref="HoldoffConfig"/> has.</summary>
    [Flags]
    public enum ConfigParts : uint { None = 0, Breaker = 1, Budget = 2, Quota = 4, Classifier = 8, Group = 16, Execute = 32 }

    /// <summary>A configuration in holdoff's neutral JSON format (durations in milliseconds,
    /// every part and field optional), parsed and validated by the core.</summary>
    public sealed class HoldoffConfig : IDisposable
    {
        internal readonly ConfigHandle Handle;

        HoldoffConfig(ConfigHandle h) { Handle = h; }

        /// <summary>Throws HoldoffConfigException naming the first invalid field (config for
        /// JSON that does not parse or has an unknown key).</summary>
        public static HoldoffConfig Parse(string json)
        {
            byte[] b = Encoding.UTF8.GetBytes(json);
            ConfigHandle h;
            Status.Check(Native.holdoff_config_parse(b, (UIntPtr)b.Length, out h));
            return new HoldoffConfig(h);
        }

        public ConfigParts Parts
        {
            get
            {
                uint p;
                Status.Check(Native.holdoff_config_parts(Handle, out p));
                return (ConfigParts)p;
            }
        }

        /// <summary>The <c>execute</c> part's <c>attempt_timeout_ms</c>: null for no limit (the
        /// default), for <see cref="Policy.AttemptTimeout"/>.</summary>
        public TimeSpan? AttemptTimeout
        {
            get
            {
                var o = ExecutionOptions();
                return Limits.Span(o.AttemptTimeout, o.AttemptTimeoutNs);
            }
        }

        /// <summary>The <c>execute</c> part's <c>total_timeout_ms</c>: null for no limit; the
        /// core's default (60 s) when absent; for <see cref="Policy.TotalTimeout"/>.</summary>
        public TimeSpan? TotalTimeout
        {
            get
            {
                var o = ExecutionOptions();
                return Limits.Span(o.TotalTimeout, o.TotalTimeoutNs);
            }
        }

        internal ExecutionOptionsC ExecutionOptions()
        {
            ExecutionOptionsC o;
            Status.Check(Native.holdoff_config_execution_options(Handle, out o));
            return o;
        }

        static ClockHandle ClockOf(Clock clock, out Clock temp)
        {
            temp = null;
            if (clock == null) clock = temp = new SystemClock();
            return clock.Handle;
        }

        public Breaker NewBreaker(Clock clock = null)
        {
            Clock temp = null;
            try
            {
                BreakerHandle h;
                Status.Check(Native.holdoff_config_new_breaker(Handle, ClockOf(clock, out temp), out h));
                return new Breaker(h);
            }
            finally
            {
                if (temp != null) temp.Dispose();
            }
        }

        /// <summary>A group whose template is the breaker part (the core's defaults without one),
        /// bounded by group.max_keys (10 000 without it).</summary>
        public BreakerGroup NewBreakerGroup(Clock clock = null)
        {
            Clock temp = null;
            try
            {
                GroupHandle h;
                Status.Check(Native.holdoff_config_new_group(Handle, ClockOf(clock, out temp), out h));
                return new BreakerGroup(h);
            }
            finally
            {
                if (temp != null) temp.Dispose();
            }
        }

        public RetryBudget NewRetryBudget(Clock clock = null)
        {
            Clock temp = null;
            try
            {
                BudgetHandle h;
                Status.Check(Native.holdoff_config_new_budget(Handle, ClockOf(clock, out temp), out h));
                return new RetryBudget(h);
            }
            finally
            {
                if (temp != null) temp.Dispose();
            }
        }

        public RetryQuota NewRetryQuota()
        {
            QuotaHandle h;
            Status.Check(Native.holdoff_config_new_quota(Handle, out h));
            return new RetryQuota(h);
        }

        public Classifier NewClassifier()
        {
            ClassifierHandle h;
            Status.Check(Native.holdoff_config_new_classifier(Handle, out h));
            return new Classifier(h);
        }

        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>Writes options as the neutral JSON format.</summary>
    internal static class ConfigJson
    {
        static string Num(double v)
        {
            if (double.IsNaN(v)) return "\"NaN\"";
            if (double.IsPositiveInfinity(v)) return "\"Infinity\"";
            if (double.IsNegativeInfinity(v)) return "\"-Infinity\"";
            return v.ToString("R", CultureInfo.InvariantCulture);
        }

        internal static string Ms(TimeSpan d) { return Num(d.Ticks / 10000.0); }

        static string Backoff(BackoffOptions b)
        {
            return string.Format("{{\"initial_ms\":{0},\"multiplier\":{1},\"max_ms\":{2},\"jitter\":{3}}}",
                Ms(b.Initial), Num(b.Multiplier), Ms(b.Max), Num(b.Jitter));
        }

        static string List(int[] v)
        {
            var parts = new List<string>();
            foreach (var x in v) parts.Add(x.ToString(CultureInfo.InvariantCulture));
            return "[" + string.Join(",", parts) + "]";
        }

        public static string Of(BreakerOptions b, BudgetOptions g, QuotaOptions q, ClassifierOptions c, int? maxKeys = null)
        {
            var parts = new List<string>();
            if (b != null)
            {
                var f = new List<string>();
                var t = b.Trip;
                if (t != null && t.Kind == "consecutive")
                    f.Add(string.Format("\"trip\":{{\"policy\":\"consecutive\",\"threshold\":{0}}}", t.Threshold));
                else if (t != null && t.Kind == "window")
                    f.Add(string.Format("\"trip\":{{\"policy\":\"window\",\"threshold\":{0},\"window_ms\":{1}}}", t.Threshold, Ms(t.Window)));
                else if (t != null)
                    f.Add(string.Format("\"trip\":{{\"policy\":\"rate\",\"threshold\":{0},\"min_calls\":{1},\"window_ms\":{2}{3}}}",
                        Num(t.Rate), t.MinCalls, Ms(t.Window), t.Buckets != 0 ? ",\"buckets\":" + t.Buckets : ""));
                if (b.OpenInterval != null) f.Add("\"open_interval\":" + Backoff(b.OpenInterval));
                f.Add("\"recoveries\":" + b.Recoveries);
                f.Add("\"max_probes_in_flight\":" + b.MaxProbesInFlight);
                if (b.ProbeTimeout != TimeSpan.Zero) f.Add("\"probe_timeout_ms\":" + Ms(b.ProbeTimeout));
                f.Add("\"max_retry_later_ms\":" + Ms(b.MaxRetryLater));
                f.Add("\"seed\":" + b.Seed.ToString(CultureInfo.InvariantCulture));
                parts.Add("\"breaker\":{" + string.Join(",", f) + "}");
            }
            if (g != null)
            {
                parts.Add(string.Format("\"budget\":{{\"max_rate_limit_duration_ms\":{0},\"retry_after_cap_ms\":{1},\"max_retries\":{2}," +
                    "\"backoff\":{3},\"max_backoff_duration_ms\":{4},\"give_up_above_cap\":{5},\"seed\":{6}}}", Ms(g.MaxRateLimitDuration),
                    Ms(g.RetryAfterCap), g.MaxRetries, Backoff(g.Backoff), Ms(g.MaxBackoffDuration), g.GiveUpAboveCap ? "true" : "false",
                    g.Seed.ToString(CultureInfo.InvariantCulture)));
            }
            if (q != null)
            {
                parts.Add(string.Format("\"quota\":{{\"capacity\":{0},\"retry_cost\":{1},\"timeout_cost\":{2},\"success_refill\":{3}}}",
                    q.Capacity, q.RetryCost, q.TimeoutCost, q.SuccessRefill));
            }
            if (c != null)
            {
                var f = new List<string>();
                if (c.FailureStatuses != null) f.Add("\"failure_statuses\":" + List(c.FailureStatuses));
                if (c.AnswerStatuses != null) f.Add("\"answer_statuses\":" + List(c.AnswerStatuses));
                if (c.RetryAfterStatuses != null) f.Add("\"retry_after_statuses\":" + List(c.RetryAfterStatuses));
                if (c.RateLimitDefaultWait.HasValue) f.Add("\"rate_limit_default_wait_ms\":" + Ms(c.RateLimitDefaultWait.Value));
                parts.Add("\"classifier\":{" + string.Join(",", f) + "}");
            }
            if (maxKeys.HasValue) parts.Add("\"group\":{\"max_keys\":" + maxKeys.Value.ToString(CultureInfo.InvariantCulture) + "}");
            return "{" + string.Join(",", parts) + "}";
        }
    }
}
