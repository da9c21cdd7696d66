using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_fast_path (include/holdoff.h), field for field: where a breaker's 64-bit
    /// fast-path word is (valid while the native breaker lives), the bits that must be 0 to admit
    /// on it, the id its permits carry and the word's layout version. 24 bytes.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct FastPathC
    {
        public IntPtr Word;
        public ulong AdmitMask;
        public uint Breaker;
        public uint Version;
    }
}
