using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>One change of a breaker's state (<see cref="Breaker.DrainEvents"/>).</summary>
    public sealed class StateChange
    {
        /// <summary>When it happened, on the breaker's clock (the time since its origin).</summary>
        public TimeSpan At { get; }

        /// <summary>The state before.</summary>
        public State From { get; }

        /// <summary>The state after.</summary>
        public State To { get; }

        /// <summary>The episode number after the change (0 before the first trip).</summary>
        public uint Episode { get; }

        /// <summary>Why the state changed.</summary>
        public Reason Reason { get; }

        /// <summary>For <see cref="Holdoff.Reason.RetryLater"/>: the delay the upstream asked for,
        /// before the breaker's <see cref="BreakerOptions.MaxRetryLater"/> guard; null
        /// otherwise.</summary>
        public TimeSpan? RequestedDelay { get; }

        /// <summary>For an opening: how long until the first probe may be admitted; null
        /// otherwise.</summary>
        public TimeSpan? OpenFor { get; }

        internal StateChange(StateChangeC e)
        {
            At = Units.Span(e.AtNs);
            From = (State)e.From;
            To = (State)e.To;
            Episode = e.Episode;
            Reason = (Reason)e.Reason;
            RequestedDelay = Units.Opt(e.HasRequestedDelay, e.RequestedDelayNs);
            OpenFor = Units.Opt(e.HasOpenFor, e.OpenForNs);
        }
    }
}
