using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A side-effect-free view of a breaker, read at once (<see cref="Breaker.Snapshot"/>).</summary>
    public sealed class Snapshot
    {
        /// <summary>The state now.</summary>
        public State State { get; }

        /// <summary>The number of the current (or last) open episode; 0 before the first trip.</summary>
        public uint Episode { get; }

        /// <summary>Failures the trip policy counts now (consecutive, or inside its window).</summary>
        public ulong Failures { get; }

        /// <summary>Consecutive answers to current-episode probes so far.</summary>
        public uint Recoveries { get; }

        /// <summary>Probes admitted and not yet answered, cancelled or timed out.</summary>
        public uint ProbesInFlight { get; }

        /// <summary>While open or half-open, the time until the next probe may be admitted
        /// (<see cref="TimeSpan.Zero"/> when one may go now); null while closed, disabled or
        /// forced open.</summary>
        public TimeSpan? RetryAfter { get; }

        /// <summary>Whether <see cref="Breaker.Allow"/> would admit a probe now.</summary>
        public bool ProbeReady { get; }

        /// <summary>The open interval in force while open or half-open; null otherwise.</summary>
        public TimeSpan? Interval { get; }

        /// <summary>Times the breaker opened from closed.</summary>
        public ulong Opens { get; }

        /// <summary>Times the breaker closed by recovering.</summary>
        public ulong Closes { get; }

        /// <summary>Probes admitted.</summary>
        public ulong Probes { get; }

        /// <summary>Admissions refused.</summary>
        public ulong Refusals { get; }

        /// <summary>Answers to permits of an earlier episode, which moved nothing.</summary>
        public ulong StaleAnswers { get; }

        /// <summary>State changes dropped because <see cref="Breaker.DrainEvents"/> was not called
        /// often enough.</summary>
        public ulong EventsDropped { get; }

        internal Snapshot(SnapshotC s)
        {
            State = (State)s.State;
            Episode = s.Episode;
            Failures = s.Failures;
            Recoveries = s.Recoveries;
            ProbesInFlight = s.ProbesInFlight;
            RetryAfter = Units.Opt(s.HasRetryAfter, s.RetryAfterNs);
            ProbeReady = s.ProbeReady != 0;
            Interval = Units.Opt(s.HasInterval, s.IntervalNs);
            Opens = s.Opens;
            Closes = s.Closes;
            Probes = s.Probes;
            Refusals = s.Refusals;
            StaleAnswers = s.StaleAnswers;
            EventsDropped = s.EventsDropped;
        }
    }
}
