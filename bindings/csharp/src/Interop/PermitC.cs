using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_permit (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct PermitC
    {
        public uint Episode;
        public byte Probe;
        public byte Recorded;
        public ushort Reserved;
        public uint RawBreaker;
        public uint RawEpisode;
        public uint RawProbe;
    }
}
