using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The time source every breaker and budget reads: <see cref="SystemClock"/> in
    /// production, <see cref="ManualClock"/> in tests. The objects built with a clock keep it
    /// alive: disposing this object releases only this reference.</summary>
    public abstract class Clock : IDisposable
    {
        internal ClockHandle Handle;

        /// <summary>Releases this reference to the clock.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
