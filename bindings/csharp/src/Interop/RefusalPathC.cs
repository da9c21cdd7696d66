using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_refusal_path (include/holdoff.h), field for field: where a breaker's
    /// refusal block is (docs/ffi.md "The refusal block").</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct RefusalPathC
    {
        public IntPtr Word;
        public IntPtr RefuseUntil;
        public IntPtr Refusals;
        public IntPtr Seq;
        public ulong CountingMask;
        public uint Version;
    }
}
