using System;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A configuration in holdoff's neutral JSON format (durations in milliseconds,
    /// every part and field optional), parsed and validated by the core.</summary>
    public sealed class HoldoffConfig : IDisposable
    {
        internal readonly ConfigHandle Handle;

        HoldoffConfig(ConfigHandle h) { Handle = h; }

        /// <summary>Parses and validates <paramref name="json"/> (durations in milliseconds, as the
        /// format's <c>_ms</c> keys say). Throws InvalidConfigException naming the first invalid
        /// field (config for JSON that does not parse or has an unknown key);
        /// ArgumentNullException for a null <paramref name="json"/>.</summary>
        public static HoldoffConfig Parse(string json)
        {
            if (json == null) throw new ArgumentNullException(nameof(json));
            byte[] b = Encoding.UTF8.GetBytes(json);
            ConfigHandle h;
            Status.Check(Native.holdoff_config_parse(b, (UIntPtr)b.Length, out h));
            return new HoldoffConfig(h);
        }

        /// <summary>Which parts the configuration has.</summary>
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

        /// <summary>A C constructor of an object that reads a clock.</summary>
        delegate uint WithClock<H>(ConfigHandle config, ClockHandle clock, out H made);

        /// <summary>Builds with <paramref name="clock"/>, or with the system clock when it is null
        /// (the object keeps its own reference to it).</summary>
        H Make<H>(WithClock<H> make, Clock clock)
        {
            Clock temp = null;
            try
            {
                if (clock == null) clock = temp = new SystemClock();
                H h;
                Status.Check(make(Handle, clock.Handle, out h));
                return h;
            }
            finally
            {
                if (temp != null) temp.Dispose();
            }
        }

        /// <summary>A breaker from the breaker part (the core's defaults without one), reading
        /// <paramref name="clock"/> (when null, the one system clock every breaker made without a
        /// clock shares; such a breaker may refuse without calling into the library).</summary>
        public Breaker NewBreaker(Clock clock = null)
        {
            return new Breaker(NewBreakerHandle(clock), clock == null);
        }

        /// <summary>The native breaker <see cref="NewBreaker"/> wraps, on the breakers' shared
        /// system clock when <paramref name="clock"/> is null.</summary>
        internal BreakerHandle NewBreakerHandle(Clock clock)
        {
            return Make<BreakerHandle>(Native.holdoff_breaker_new, clock ?? BreakerClock.Shared);
        }

        /// <summary>A group whose template is the breaker part (the core's defaults without one),
        /// bounded by group.max_keys (10 000 without it), reading <paramref name="clock"/> (the
        /// system clock when null).</summary>
        public BreakerGroup NewBreakerGroup(Clock clock = null)
        {
            return new BreakerGroup(Make<BreakerGroupHandle>(Native.holdoff_breaker_group_new, clock));
        }

        /// <summary>A retry budget from the budget part (the core's defaults without one), reading
        /// <paramref name="clock"/> (the system clock when null).</summary>
        public RetryBudget NewRetryBudget(Clock clock = null)
        {
            return new RetryBudget(Make<RetryBudgetHandle>(Native.holdoff_retry_budget_new, clock));
        }

        /// <summary>A retry quota from the quota part (the core's defaults without one).</summary>
        public RetryQuota NewRetryQuota()
        {
            RetryQuotaHandle h;
            Status.Check(Native.holdoff_retry_quota_new(Handle, out h));
            return new RetryQuota(h);
        }

        /// <summary>A classifier from the classifier part (the defaults without one).</summary>
        public Classifier NewClassifier()
        {
            ClassifierHandle h;
            Status.Check(Native.holdoff_classifier_new(Handle, out h));
            return new Classifier(h);
        }

        /// <summary>Releases the configuration (the objects built from it stay valid).</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
