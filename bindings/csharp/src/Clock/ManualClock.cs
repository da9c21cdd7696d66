using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A clock that moves only when told to, for tests. Times are TimeSpans since its
    /// origin; it starts at <see cref="TimeSpan.Zero"/>.</summary>
    public sealed class ManualClock : Clock
    {
        /// <summary>A clock whose origin is the wall time <paramref name="wallOrigin"/> (for
        /// Retry-After HTTP-dates), 1970..2554; ArgumentOutOfRangeException outside.</summary>
        public ManualClock(DateTimeOffset wallOrigin)
        {
            Status.Check(Native.holdoff_clock_new_manual(Units.UnixNs(wallOrigin, "wallOrigin"), out Handle));
        }

        /// <summary>A clock whose origin is the Unix epoch.</summary>
        public ManualClock() : this(DateTimeOffset.FromUnixTimeMilliseconds(0)) { }

        /// <summary>Moves the clock to <paramref name="t"/> after its origin; earlier than now
        /// throws a HoldoffException named clock_backwards, a negative <paramref name="t"/>
        /// ArgumentOutOfRangeException.</summary>
        public void Set(TimeSpan t) { Status.Check(Native.holdoff_clock_set(Handle, Units.Ns(t, "t"))); }

        /// <summary>Moves the clock forward by <paramref name="d"/> (saturating); a negative
        /// <paramref name="d"/> throws ArgumentOutOfRangeException.</summary>
        public void Advance(TimeSpan d) { Status.Check(Native.holdoff_clock_advance(Handle, Units.Ns(d, "d"))); }

        /// <summary>The time since the origin.</summary>
        public TimeSpan Now
        {
            get
            {
                ulong ns;
                Status.Check(Native.holdoff_clock_now(Handle, out ns));
                return Units.Span(ns);
            }
        }

        /// <summary>The wall time now: the origin's wall time plus <see cref="Now"/>.</summary>
        public DateTimeOffset WallNow
        {
            get
            {
                ulong ns;
                Status.Check(Native.holdoff_clock_wall_now(Handle, out ns));
                return DateTimeOffset.FromUnixTimeMilliseconds(0).AddTicks((long)(ns / 100));
            }
        }
    }
}
