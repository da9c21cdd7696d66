using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_refusal (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct RefusalC
    {
        public ulong RetryAfterNs;
        public uint State;
        public uint Episode;
        public byte HasRetryAfter;
    }
}
