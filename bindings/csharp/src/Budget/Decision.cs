using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>What the retry budget (or a policy, after an attempt) decided.</summary>
    public sealed class Decision
    {
        /// <summary>Done (no retry needed), Retry after <see cref="Delay"/>, or GiveUp for
        /// <see cref="Reason"/>.</summary>
        public DecisionKind Kind { get; }

        /// <summary>The wait before the next attempt (Retry); <see cref="TimeSpan.Zero"/>
        /// otherwise. Never shorter than the server asked, up to the budget's cap.</summary>
        public TimeSpan Delay { get; }

        /// <summary>Where <see cref="Delay"/> came from (Retry); null otherwise.</summary>
        public WaitSource? Source { get; }

        /// <summary>The server's own delay before the cap, when the answer carried one.</summary>
        public TimeSpan? ServerDelay { get; }

        /// <summary>Whether the server asked for longer than the budget's cap, so the wait is the
        /// cap (never silent).</summary>
        public bool Capped { get; }

        /// <summary>Why the caller should stop retrying (GiveUp); null otherwise.</summary>
        public GiveUpReason? Reason { get; }

        internal Decision(DecisionC d)
        {
            Kind = (DecisionKind)d.Kind;
            Delay = Units.Span(d.DelayNs);
            Source = Kind == DecisionKind.Retry ? (WaitSource)d.Source : (WaitSource?)null;
            ServerDelay = Units.Opt(d.HasServerDelay, d.ServerDelayNs);
            Capped = d.Capped != 0;
            Reason = Kind == DecisionKind.GiveUp ? (GiveUpReason)d.Reason : (GiveUpReason?)null;
        }
    }
}
