using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The retry budget's state of one logical call (<see cref="RetryBudget.Decide"/>):
    /// one per call, disposed when it ends.</summary>
    public sealed class RetryState : IDisposable
    {
        internal readonly RetryStateHandle Handle;

        /// <summary>The state of a new call.</summary>
        public RetryState() { Status.Check(Native.holdoff_retry_state_new(out Handle)); }

        /// <summary>Retries the budget allowed so far on the counted path.</summary>
        public int Retries
        {
            get
            {
                uint n;
                Status.Check(Native.holdoff_retry_state_retries(Handle, out n));
                return (int)n;
            }
        }

        /// <summary>Releases the state.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
