using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_decision (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct DecisionC
    {
        public ulong DelayNs, ServerDelayNs;
        public uint Kind, Source, Reason;
        public byte Capped, HasServerDelay;
    }
}
