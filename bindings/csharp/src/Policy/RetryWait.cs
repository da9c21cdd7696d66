using System;

namespace Holdoff
{
    /// <summary>A wait before the next attempt, as <see cref="Policy.OnRetry"/> sees it.</summary>
    public sealed class RetryWait
    {
        /// <summary>Attempts made so far.</summary>
        public int Attempts { get; }
        /// <summary>How long the helper waits now (never shorter than the server asked, up to
        /// the budget's cap).</summary>
        public TimeSpan Delay { get; }
        /// <summary>Where the delay came from: the server's Retry-After, the backoff, or the
        /// breaker's next probe.</summary>
        public WaitSource Source { get; }
        /// <summary>Whether the server asked for longer than the budget's cap.</summary>
        public bool Capped { get; }
        /// <summary>The server's own delay before the cap, when it gave one.</summary>
        public TimeSpan? ServerDelay { get; }
        /// <summary>The last attempt's exception, or null.</summary>
        public Exception LastError { get; }
        /// <summary>The last attempt's value or HTTP response, or null.</summary>
        public object LastResult { get; }

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
}
