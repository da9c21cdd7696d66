// What a caller gets when holdoff stops a call: the single "upstream unavailable" type and its two
// kinds (the breaker refused; the retries gave up), and the exception an operation throws to say
// "retry later".
using System;
using Holdoff.Interop;

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
        public GiveUpReason Reason { get; private set; }

        /// <summary>Attempts made (0 when the first one was refused).</summary>
        public int Attempts { get; private set; }

        /// <summary>When trying again could help: the breaker's time to its next probe (null while
        /// forced open), or the server's delay for a rate-limit give-up; null when unknown.</summary>
        public TimeSpan? RetryAfter { get; private set; }

        /// <summary>The server's own delay (Retry-After and the like) before the budget's cap,
        /// when the last answer carried one.</summary>
        public TimeSpan? ServerDelay { get; private set; }

        /// <summary>Whether the server's delay was above the budget's cap.</summary>
        public bool Capped { get; private set; }

        /// <summary>The last attempt's value (for HttpClient, its <c>HttpResponseMessage</c>, left
        /// undisposed for the caller to read and dispose), or null.</summary>
        public object LastResult { get; private set; }

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

    /// <summary>The breaker refused the call: a first attempt while it is open, or a retry it
    /// would keep waiting for past what is left of the budget or the total timeout.</summary>
    public sealed class BreakerOpenException : UpstreamUnavailableException
    {
        /// <summary>The breaker's state at a <see cref="Breaker.Allow"/> refusal; null from the
        /// retry helpers (the refusal says when to retry, not the state).</summary>
        public State? State { get; private set; }

        /// <summary>The open episode at a <see cref="Breaker.Allow"/> refusal; null from the
        /// retry helpers.</summary>
        public uint? Episode { get; private set; }

        /// <summary>A refusal of <see cref="Breaker.Allow"/>: <paramref name="retryAfter"/> is
        /// null while forced open.</summary>
        public BreakerOpenException(TimeSpan? retryAfter, State state, uint episode)
            : base(GiveUpReason.BreakerOpen, 0, retryAfter, null, false, null, null)
        {
            State = state;
            Episode = episode;
        }

        /// <summary>A refusal of the retry helpers after <paramref name="attempts"/> attempts,
        /// with the last attempt's exception or value attached.</summary>
        public BreakerOpenException(int attempts, TimeSpan? retryAfter, Exception lastError, object lastResult)
            : base(GiveUpReason.BreakerOpen, attempts, retryAfter, null, false, lastError, lastResult)
        {
        }

        // Formatted when read, not when built: TryAllow hands out a refusal on every call to an
        // open breaker, and formatting the TimeSpan there cost more than the refusal itself.
        public override string Message
        {
            get
            {
                string state = State.HasValue ? Names.Of(State.Value) : RetryAfter.HasValue ? "open" : "forced_open";
                string after = Attempts > 0 ? string.Format(" after {0} attempts", Attempts) : "";
                return RetryAfter.HasValue
                    ? string.Format("holdoff: breaker {0}{1}: retry after {2}", state, after, RetryAfter.Value)
                    : string.Format("holdoff: breaker {0}{1}: calls refused until reset", state, after);
            }
        }
    }

    /// <summary>The retry helpers gave up for <see cref="UpstreamUnavailableException.Reason"/>:
    /// retries or budget spent, quota empty, the total timeout, a Retry-After above the cap, or
    /// failures (500s) until the end.</summary>
    public sealed class GiveUpException : UpstreamUnavailableException
    {
        public GiveUpException(GiveUpReason reason, int attempts, TimeSpan? retryAfter, TimeSpan? serverDelay,
            bool capped, Exception lastError, object lastResult)
            : base(reason, attempts, retryAfter, serverDelay, capped, lastError, lastResult)
        {
        }

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

    /// <summary>Thrown by an operation to say the upstream asked to be left alone for
    /// <see cref="Delay"/> (a rate limit): the retry helpers wait that long before the next
    /// attempt, never shorter (up to the budget's cap), and the breaker opens for it.</summary>
    public sealed class RetryLaterException : Exception
    {
        /// <summary>The server's delay (0 is not a usable hint: a plain failure).</summary>
        public TimeSpan Delay { get; private set; }

        /// <summary>ArgumentOutOfRangeException for a negative <paramref name="delay"/>.</summary>
        public RetryLaterException(TimeSpan delay, string message = null, Exception inner = null)
            : base(message ?? string.Format("holdoff: the upstream asked to retry after {0}", delay), inner)
        {
            if (delay < TimeSpan.Zero) throw new ArgumentOutOfRangeException("delay", delay, "must not be negative");
            Delay = delay;
        }
    }
}
