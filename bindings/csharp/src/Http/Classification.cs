using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A classified HTTP response (<see cref="Classifier.Classify"/>,
    /// <see cref="Policy.AfterResponse"/>).</summary>
    public sealed class Classification
    {
        /// <summary>What the breaker and the budget are told (a retry-later carries the hint's
        /// delay).</summary>
        public Outcome Outcome { get; }

        /// <summary>The response's delay hint (its source says which header).</summary>
        public Hint Hint { get; }

        /// <summary>The response's <c>x-should-retry</c> (true or false), null without one (or with
        /// another value). false makes any status from 400 up an answer and true makes an answer a
        /// failure; it never changes a success, a broken status or a status listed in the
        /// classifier's options (<see cref="Outcome"/> already says the result).</summary>
        public bool? ShouldRetry { get; }

        internal Classification(ClassificationC c)
        {
            Outcome = Outcome.FromC(c.Outcome, c.RetryLaterNs);
            Hint = new Hint(c.Hint);
            ShouldRetry = c.HasShouldRetry != 0 ? c.ShouldRetry != 0 : (bool?)null;
        }
    }
}
