using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_group_snapshot (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct GroupSnapshotC
    {
        public UIntPtr Keys, MaxKeys;
        public ulong Evictions, Overflows;
    }
}
