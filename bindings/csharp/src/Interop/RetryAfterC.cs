using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_retry_after (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct RetryAfterC
    {
        public ulong DelayNs;
        public uint Unusable;
        public uint Source;
    }
}
