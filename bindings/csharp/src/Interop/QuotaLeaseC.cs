using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_quota_lease (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct QuotaLeaseC
    {
        public ulong Cost, Available;
        public byte Acquired, Returned;
        public ushort Reserved;
        public uint RawQuota;
    }
}
