using System;

namespace Holdoff
{
    /// <summary>The retry helpers gave up for <see cref="UpstreamUnavailableException.Reason"/>:
    /// retries or budget spent, quota empty, the total timeout, a Retry-After above the cap, or
    /// failures (500s) until the end.</summary>
    public sealed class GiveUpException : UpstreamUnavailableException
    {
        /// <summary>When trying again could help: for a rate-limit give-up (budget spent, a
        /// Retry-After that does not fit what is left or is above the cap), the server's delay;
        /// for the total timeout, the open breaker's time to its next probe, else the server's
        /// delay up to the cap; for a request that cannot be sent twice, the wait the helper would
        /// have made; null otherwise.</summary>
        public override TimeSpan? RetryAfter { get { return base.RetryAfter; } }

        /// <summary>A give-up after <paramref name="attempts"/> attempts, with the last attempt's
        /// exception or value attached.</summary>
        public GiveUpException(GiveUpReason reason, int attempts, TimeSpan? retryAfter, TimeSpan? serverDelay,
            bool capped, Exception lastError, object lastResult)
            : base(reason, attempts, retryAfter, serverDelay, capped, lastError, lastResult)
        {
        }

        /// <summary>The reason, the server's delay and when to retry.</summary>
        public override string Message
        {
            get
            {
                string m = string.Format("holdoff: gave up after {0} attempts ({1})", Attempts, Names.Of(Reason));
                if (ServerDelay.HasValue) m += string.Format("; the server asked for {0}{1}", ServerDelay.Value, Capped ? ", above the cap" : "");
                if (RetryAfter.HasValue) m += string.Format("; retry after {0}", RetryAfter.Value);
                return m;
            }
        }
    }
}
