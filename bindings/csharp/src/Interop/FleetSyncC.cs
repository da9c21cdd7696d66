using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_fleet_sync (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct FleetSyncC
    {
        public ulong FleetEpisode, NextProbeAtMs, Sent;
        public uint FleetState, FleetRecoveries, Error;
        public byte Ok, Attached, Detached, Reattached, Granted, HasRecord;
    }
}
