using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A policy's state of one logical call (<see cref="Policy.BeforeAttempt"/>,
    /// <see cref="Policy.AfterAttempt"/>): one per call, disposed when it ends.</summary>
    public sealed class PolicyCall : IDisposable
    {
        internal readonly PolicyCallHandle Handle;

        /// <summary>The state of a new call.</summary>
        public PolicyCall() { Status.Check(Native.holdoff_policy_call_new(out Handle)); }

        /// <summary>Attempts admitted so far.</summary>
        public int Attempts
        {
            get
            {
                uint n;
                Status.Check(Native.holdoff_policy_call_attempts(Handle, out n));
                return (int)n;
            }
        }

        /// <summary>Releases the state.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
