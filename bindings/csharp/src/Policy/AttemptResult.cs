using System;

namespace Holdoff
{
    /// <summary>One finished attempt, as <see cref="Policy.OnAttempt"/> sees it.</summary>
    public sealed class AttemptResult
    {
        /// <summary>1 for the first attempt.</summary>
        public int Number { get; }
        /// <summary>Whether the attempt was a probe of an open breaker.</summary>
        public bool IsProbe { get; }
        /// <summary>What the attempt was recorded as (a programming error, the helper's own
        /// failure reporting the attempt, such as a classifier that threw, and the caller's
        /// cancellation are <see cref="OutcomeKind.Cancelled"/>; an async attempt cut by its time
        /// limit is a <see cref="OutcomeKind.Timeout"/>).</summary>
        public Outcome Outcome { get; }
        /// <summary>The attempt's exception (a TimeoutException when its time limit cut an async
        /// attempt; what a sync one threw, whenever it threw it), or null.</summary>
        public Exception Error { get; }
        /// <summary>The attempt's value or HTTP response, or null.</summary>
        public object Result { get; }

        internal AttemptResult(int number, bool isProbe, Outcome outcome, Exception error, object result)
        {
            Number = number;
            IsProbe = isProbe;
            Outcome = outcome;
            Error = error;
            Result = result;
        }

        public override string ToString()
        {
            return string.Format("attempt {0}{1}: {2}", Number, IsProbe ? " (probe)" : "", Outcome);
        }
    }
}
