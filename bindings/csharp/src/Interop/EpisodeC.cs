using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_episode (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct EpisodeC
    {
        public ulong StartNs;
        public byte Active;
    }
}
