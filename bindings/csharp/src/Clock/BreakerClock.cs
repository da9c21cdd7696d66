using System;
using System.Diagnostics;
using System.IO;
using System.Threading;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The one system clock of every breaker made without a clock, and the mapping of
    /// <see cref="Stopwatch.GetTimestamp"/> onto its readings that lets such a breaker refuse in
    /// place (docs/ffi.md "The refusal block"). One clock for all of them, rather than one each:
    /// a breaker's times are differences on one monotonic clock, so they are all alike, and a
    /// shared one is what a single offset can map. Never released; <see cref="Library.LiveHandles"/>
    /// leaves it out.</summary>
    internal static class BreakerClock
    {
        static SystemClock shared;
        static int made;
        // Nanoseconds per Stopwatch tick, and the offset (ns) from Stopwatch ticks times that to
        // the shared clock's readings; Mapped says whether both were measured and may be used.
        static long tickNs;
        static long offsetNs;
        static bool mapped;

        /// <summary>Whether the shared clock exists (it then counts as one native handle).</summary>
        internal static bool Made { get { return Volatile.Read(ref made) != 0; } }

        /// <summary>Whether <see cref="NowNs"/> may be used: the shared clock exists and
        /// Stopwatch's clock is the one it reads (Linux's CLOCK_MONOTONIC), offset measured.</summary>
        internal static bool Mapped { get { return Volatile.Read(ref shared) != null && mapped; } }

        /// <summary>The shared system clock, made on first use (throws as
        /// <see cref="SystemClock()"/> does if the library cannot make one).</summary>
        internal static SystemClock Shared
        {
            get
            {
                var c = Volatile.Read(ref shared);
                return c ?? Make();
            }
        }

        static SystemClock Make()
        {
            lock (typeof(BreakerClock))
            {
                if (shared != null) return shared;
                var c = new SystemClock();
                // A handle for the process's life: not one a finalizer should release at exit
                // while a breaker still reads it.
                GC.SuppressFinalize(c.Handle);
                Volatile.Write(ref made, 1);
                mapped = Measure(c.Handle);
                Volatile.Write(ref shared, c);
                return c;
            }
        }

        /// <summary>A reading of the shared clock in nanoseconds since its origin, made from
        /// <see cref="Stopwatch.GetTimestamp"/>: never earlier than the library's own reading at
        /// the same moment (see <see cref="Measure"/>), so a refusal decided on it only falls back
        /// to the library early, never refuses past a deadline. Only when <see cref="Mapped"/>.</summary>
        internal static ulong NowNs()
        {
            long v = Stopwatch.GetTimestamp() * tickNs + offsetNs;
            return v < 0 ? 0 : (ulong)v;
        }

        /// <summary>Measures the offset from Stopwatch's ticks (ns) to the readings of
        /// <paramref name="clock"/>, a system clock; false where the two clocks are not known to
        /// be one. On Linux, Mono's Stopwatch reads CLOCK_MONOTONIC truncated to its tick, and the
        /// library's system clock is CLOCK_MONOTONIC since its origin, so one constant maps one onto
        /// the other. Each try reads Stopwatch, then the library: that difference is the true offset
        /// plus the time between the two readings plus the truncation, never less, and the smallest
        /// of a few tries is the closest; one tick more covers the truncation of a later reading.
        /// A try in the other order bounds the offset from above: were the two far apart, the
        /// clocks would not be one, and nothing is mapped.</summary>
        static bool Measure(ClockHandle clock)
        {
            if (!IsLinux() || !Stopwatch.IsHighResolution || Stopwatch.Frequency <= 0
                || Stopwatch.Frequency > 1000000000L || 1000000000L % Stopwatch.Frequency != 0)
                return false;
            long tick = 1000000000L / Stopwatch.Frequency;
            long low = long.MaxValue, high = long.MinValue;
            for (int i = 0; i < 16; i++)
            {
                ulong ns;
                long t = Stopwatch.GetTimestamp();
                if (Native.holdoff_clock_now(clock, out ns) != Status.Ok) return false;
                low = Math.Min(low, (long)ns - t * tick);
                if (Native.holdoff_clock_now(clock, out ns) != Status.Ok) return false;
                t = Stopwatch.GetTimestamp();
                high = Math.Max(high, (long)ns - t * tick);
            }
            // Forward tries are at or above the true offset, reverse ones at or below it plus a
            // tick: a gap over 1 ms means two different clocks.
            if (low - high > 1000000L) return false;
            tickNs = tick;
            offsetNs = low + tick;
            return true;
        }

        static bool IsLinux()
        {
            try
            {
                return File.Exists("/proc/sys/kernel/ostype")
                    && File.ReadAllText("/proc/sys/kernel/ostype").Trim() == "Linux";
            }
            catch (IOException)
            {
                return false;
            }
            catch (UnauthorizedAccessException)
            {
                return false;
            }
        }
    }
}
