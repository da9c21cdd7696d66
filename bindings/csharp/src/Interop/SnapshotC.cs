using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_snapshot (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct SnapshotC
    {
        public ulong Failures, RetryAfterNs, IntervalNs, Opens, Closes, Probes, Refusals, StaleAnswers, EventsDropped;
        public uint State, Episode, Recoveries, ProbesInFlight;
        public byte HasRetryAfter, ProbeReady, HasInterval;
    }
}
