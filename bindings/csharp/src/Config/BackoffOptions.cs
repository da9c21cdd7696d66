using System;

namespace Holdoff
{
    /// <summary>A growing interval: step n waits min(<see cref="Initial"/> ×
    /// <see cref="Multiplier"/>^n, <see cref="Max"/>), minus up to <see cref="Jitter"/> of it.
    /// Used by <see cref="BreakerOptions.OpenInterval"/> and <see cref="BudgetOptions.Backoff"/>;
    /// the core checks the values when the object is built.</summary>
    public sealed class BackoffOptions
    {
        /// <summary>The first interval (step 0); greater than zero.</summary>
        public TimeSpan Initial { get; set; }

        /// <summary>The growth factor per step: finite, at least 1 (1 keeps the interval constant).</summary>
        public double Multiplier { get; set; }

        /// <summary>The cap on the interval before jitter; at least <see cref="Initial"/>.</summary>
        public TimeSpan Max { get; set; }

        /// <summary>The fraction of the interval, in [0, 1), that jitter may subtract; 0 disables
        /// jitter.</summary>
        public double Jitter { get; set; }
    }
}
