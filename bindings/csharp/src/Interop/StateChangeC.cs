using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_state_change (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct StateChangeC
    {
        public ulong AtNs, RequestedDelayNs, OpenForNs;
        public uint From, To, Episode, Reason;
        public byte HasRequestedDelay, HasOpenFor;
    }
}
