using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_classification (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct ClassificationC
    {
        public ulong RetryLaterNs;
        public RetryAfterC Hint;
        public uint Outcome;
        public byte ShouldRetry, HasShouldRetry;
    }
}
