using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_before (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct BeforeC
    {
        public ulong DelayNs, RetryAfterNs;
        public uint Action, Reason;
        public byte HasRetryAfter;
    }
}
