// What the retry helpers show their hooks: Policy.OnRetry before each wait, Policy.OnAttempt
// after each attempt.
using System;

namespace Holdoff
{
    /// <summary>A wait before the next attempt, as <see cref="Policy.OnRetry"/> sees it.</summary>
    public sealed class RetryWait
    {
        /// <summary>Attempts made so far.</summary>
        public int Attempts { get; private set; }
        /// <summary>How long the helper waits now (never shorter than the server asked, up to
        /// the budget's cap).</summary>
        public TimeSpan Delay { get; private set; }
        /// <summary>Where the delay came from: the server's Retry-After, the backoff, or the
        /// breaker's next probe.</summary>
        public WaitSource Source { get; private set; }
        /// <summary>Whether the server asked for longer than the budget's cap.</summary>
        public bool Capped { get; private set; }
        /// <summary>The server's own delay before the cap, when it gave one.</summary>
        public TimeSpan? ServerDelay { get; private set; }
        /// <summary>The last attempt's exception, or null.</summary>
        public Exception LastError { get; private set; }
        /// <summary>The last attempt's value or HTTP response, or null.</summary>
        public object LastResult { get; private set; }

        internal RetryWait(int attempts, TimeSpan delay, WaitSource source, bool capped, TimeSpan? serverDelay,
            Exception lastError, object lastResult)
        {
            Attempts = attempts;
            Delay = delay;
            Source = source;
            Capped = capped;
            ServerDelay = serverDelay;
            LastError = lastError;
            LastResult = lastResult;
        }

        public override string ToString()
        {
            return string.Format("after {0} attempts, wait {1} ({2}{3})", Attempts, Delay, Names.Of(Source), Capped ? ", capped" : "");
        }
    }

    /// <summary>One finished attempt, as <see cref="Policy.OnAttempt"/> sees it.</summary>
    public sealed class AttemptResult
    {
        /// <summary>1 for the first attempt.</summary>
        public int Number { get; private set; }
        /// <summary>Whether the attempt was a probe of an open breaker.</summary>
        public bool IsProbe { get; private set; }
        /// <summary>What the attempt was recorded as (a programming error, the helper's own
        /// failure reporting the attempt, such as a classifier that threw, and the caller's
        /// cancellation are <see cref="OutcomeKind.Cancelled"/>; an async attempt cut by its time
        /// limit is a <see cref="OutcomeKind.Timeout"/>).</summary>
        public Outcome Outcome { get; private set; }
        /// <summary>The attempt's exception (a TimeoutException when its time limit cut an async
        /// attempt; what a sync one threw, whenever it threw it), or null.</summary>
        public Exception Error { get; private set; }
        /// <summary>The attempt's value or HTTP response, or null.</summary>
        public object Result { get; private set; }

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
