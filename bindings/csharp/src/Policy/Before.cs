using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>What <see cref="Policy.BeforeAttempt"/> answers: Go with a permit, Wait for the
    /// breaker, or GiveUp.</summary>
    public sealed class Before
    {
        /// <summary>Go, Wait or GiveUp.</summary>
        public BeforeAction Action { get; }

        /// <summary>How long to wait for the breaker before asking again (Wait);
        /// <see cref="TimeSpan.Zero"/> otherwise.</summary>
        public TimeSpan Delay { get; }

        /// <summary>Why the call gives up (GiveUp); null otherwise.</summary>
        public GiveUpReason? Reason { get; }

        /// <summary>The breaker's time until its next probe may go (GiveUp); null while it is
        /// forced open, and for Go and Wait.</summary>
        public TimeSpan? RetryAfter { get; }

        /// <summary>The attempt's permit (Go), to record with <see cref="Policy.AfterAttempt"/> or
        /// <see cref="Policy.AfterResponse"/>; null otherwise.</summary>
        public Permit Permit { get; }

        internal Before(BeforeC b, PermitC p)
        {
            Action = (BeforeAction)b.Action;
            Delay = Units.Span(b.DelayNs);
            Reason = Action == BeforeAction.GiveUp ? (GiveUpReason)b.Reason : (GiveUpReason?)null;
            RetryAfter = Units.Opt(b.HasRetryAfter, b.RetryAfterNs);
            Permit = Action == BeforeAction.Go ? new Permit(p) : null;
        }
    }
}
