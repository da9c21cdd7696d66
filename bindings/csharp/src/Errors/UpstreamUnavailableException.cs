// What a caller gets when holdoff stops a call: the single "upstream unavailable" type and its two
// kinds (the breaker refused; the retries gave up), and the exception an operation throws to say
// "retry later".
using System;
using System.Net.Http;

namespace Holdoff
{
    /// <summary>The upstream cannot be used now: the breaker refused the call
    /// (<see cref="BreakerOpenException"/>) or the retries gave up (<see cref="GiveUpException"/>).
    /// Catch this type to handle both. <see cref="Exception.InnerException"/> is the last attempt's
    /// exception and <see cref="LastResult"/> its value or HTTP response, when it had one (null
    /// when no attempt was made).</summary>
    public abstract class UpstreamUnavailableException : Exception
    {
        /// <summary>Why: <see cref="GiveUpReason.BreakerOpen"/> for a refusal, otherwise the
        /// budget's, the quota's or the total timeout's reason (Names.Of gives the core's
        /// stable name).</summary>
        public GiveUpReason Reason { get; }

        /// <summary>Attempts made (0 when the first one was refused).</summary>
        public int Attempts { get; }

        /// <summary>When trying again could help, measured when the call stopped; null when
        /// holdoff cannot say. <see cref="BreakerOpenException.RetryAfter"/> and
        /// <see cref="GiveUpException.RetryAfter"/> say what it is for each.</summary>
        public virtual TimeSpan? RetryAfter { get; }

        /// <summary>The server's own delay (Retry-After and the like) before the budget's cap,
        /// when the last answer carried one.</summary>
        public TimeSpan? ServerDelay { get; }

        /// <summary>Whether the server's delay was above the budget's cap.</summary>
        public bool Capped { get; }

        /// <summary>The last attempt's value (for HttpClient, its <c>HttpResponseMessage</c>, left
        /// undisposed for the caller to read and dispose), or null.</summary>
        public object LastResult { get; }

        /// <summary>A stopped call: <paramref name="lastError"/> becomes the InnerException.</summary>
        protected UpstreamUnavailableException(GiveUpReason reason, int attempts, TimeSpan? retryAfter,
            TimeSpan? serverDelay, bool capped, Exception lastError, object lastResult)
            : base(null, lastError)
        {
            Reason = reason;
            Attempts = attempts;
            RetryAfter = retryAfter;
            ServerDelay = serverDelay;
            Capped = capped;
            LastResult = lastResult;
        }
    }
}
