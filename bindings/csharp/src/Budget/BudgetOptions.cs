using System;

namespace Holdoff
{
    /// <summary>A retry budget's configuration; a new instance holds the core's defaults. The
    /// core checks every value when the budget is built: <see cref="InvalidConfigException"/>
    /// names the property and the field (budget.retry_after_cap, ...).</summary>
    public sealed class BudgetOptions
    {
        BackoffOptions backoff;

        /// <summary>The total time one rate-limit episode may take (30 min by default); at least
        /// twice <see cref="RetryAfterCap"/>, room for two capped waits.</summary>
        public TimeSpan MaxRateLimitDuration { get; set; }

        /// <summary>The cap on one Retry-After wait (300 s by default); greater than zero. A
        /// server's delay is never shortened to fit what is left of the budget.</summary>
        public TimeSpan RetryAfterCap { get; set; }

        /// <summary>Retries allowed on the counted backoff path, 0..1 000 000 (10 by default; 0
        /// disables the path).</summary>
        public int MaxRetries { get; set; }

        /// <summary>The counted path's backoff; by default 500 ms doubling to 60 s, no jitter.
        /// Never null (ArgumentNullException).</summary>
        public BackoffOptions Backoff
        {
            get { return backoff; }
            set { backoff = value ?? throw new ArgumentNullException(nameof(value)); }
        }

        /// <summary>The total time of the counted path from a call's first failure (12 h by
        /// default); greater than zero.</summary>
        public TimeSpan MaxBackoffDuration { get; set; }

        /// <summary>What to do when a server asks for longer than <see cref="RetryAfterCap"/>:
        /// false (the default) waits the cap and the decision says Capped; true gives up at once
        /// with <see cref="GiveUpReason.RetryAfterAboveCap"/> and the server's delay in
        /// ServerDelay (for callers who would rather reschedule than ask before the time the
        /// server named). Neutral configuration: budget.give_up_above_cap.</summary>
        public bool GiveUpAboveCap { get; set; }

        /// <summary>The seed of the jitter's pseudo-random sequence.</summary>
        public ulong Seed { get; set; }

        /// <summary>The core's defaults.</summary>
        public BudgetOptions()
        {
            var d = CoreDefaults.Part("budget");
            MaxRateLimitDuration = CoreDefaults.Span(d, "max_rate_limit_duration_ms");
            RetryAfterCap = CoreDefaults.Span(d, "retry_after_cap_ms");
            MaxRetries = CoreDefaults.Int(d, "max_retries");
            backoff = CoreDefaults.Backoff(d.Get("backoff"));
            MaxBackoffDuration = CoreDefaults.Span(d, "max_backoff_duration_ms");
            GiveUpAboveCap = d.True("give_up_above_cap");
            Seed = CoreDefaults.Seed(d);
        }
    }
}
