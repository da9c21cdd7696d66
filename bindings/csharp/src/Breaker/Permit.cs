using System;
using System.Threading;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A permit to make one call, from <see cref="Breaker.Allow"/> or
    /// <see cref="Policy.BeforeAttempt"/>: record it exactly once, on the breaker object that
    /// admitted it.</summary>
    public sealed class Permit
    {
        internal PermitC Raw;

        internal Permit(PermitC raw) { Raw = raw; }

        /// <summary>A permit admitted on the fast-path word: what the library's allow gives while
        /// closed (episode 0, not a probe, the breaker's id and the word's episode).</summary>
        internal Permit(uint breaker, uint episode)
        {
            Raw.RawBreaker = breaker;
            Raw.RawEpisode = episode;
        }

        // In the 32-bit cell at offset 4 of holdoff_permit (probe, recorded, reserved), the bits
        // of the recorded byte on a little-endian machine.
        const int RecordedBits = 0xFF00;
        const int RecordedOne = 0x0100;

        /// <summary>Marks the permit recorded as the library would (its recorded byte, set once):
        /// false when it already was, so a second record is refused by the library. The library
        /// swaps that byte atomically; a compare-and-swap of the aligned 32-bit cell holding it is
        /// atomic with respect to that swap.</summary>
        internal unsafe bool MarkRecorded()
        {
            fixed (byte* probe = &Raw.Probe)
            {
                int* cell = (int*)probe;
                int old = Volatile.Read(ref *cell);
                return (old & RecordedBits) == 0 && Interlocked.CompareExchange(ref *cell, old | RecordedOne, old) == old;
            }
        }

        /// <summary>The open episode this call probes, or 0 when it was admitted while closed.</summary>
        public uint Episode { get { return Raw.Episode; } }

        /// <summary>Whether the call is a probe of an open breaker.</summary>
        public bool IsProbe { get { return Raw.Probe != 0; } }
    }
}
