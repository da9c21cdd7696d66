using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The process's monotonic clock.</summary>
    public sealed class SystemClock : Clock
    {
        /// <summary>A reference to the process's monotonic clock.</summary>
        public SystemClock() { Status.Check(Native.holdoff_clock_new_system(out Handle)); }
    }
}
