using System;

namespace Holdoff
{
    /// <summary>The breaker refused the call: <see cref="Breaker.Allow"/> while it is open or forced
    /// open, a first attempt of the retry helpers, or a retry it would keep waiting for past what
    /// is left of the budget or the total timeout. <see cref="RetryAfter"/> says when it admits a
    /// probe.</summary>
    public sealed class BreakerOpenException : UpstreamUnavailableException
    {
        /// <summary>The breaker's state at a <see cref="Breaker.Allow"/> refusal; null from the
        /// retry helpers (the refusal says when to retry, not the state).</summary>
        public State? State { get; }

        /// <summary>The open episode at a <see cref="Breaker.Allow"/> refusal; null from the
        /// retry helpers.</summary>
        public uint? Episode { get; }

        /// <summary>The breaker's time until its next probe may go, from the moment it refused
        /// (<see cref="TimeSpan.Zero"/> when one may go now); null when it will not say: while it
        /// is forced open, calls are refused until <see cref="Breaker.Reset"/>, with no time to
        /// wait for.</summary>
        public override TimeSpan? RetryAfter { get { return base.RetryAfter; } }

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
        /// <summary>The refusal, with the state and the time until the next probe.</summary>
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
}
