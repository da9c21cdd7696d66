using System;
using System.Collections.Generic;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The C library's execution of one call.</summary>
    internal sealed class Execution : IDisposable
    {
        readonly ExecutionHandle handle;
        bool attempting;

        public Execution(Policy policy, Limits limits)
        {
            var o = limits.C;
            Status.Check(Native.holdoff_execution_new(policy.Handle, ref o, out handle));
        }

        public StepC NextStep()
        {
            StepC s;
            Status.Check(Native.holdoff_execution_next_step(handle, out s));
            attempting = s.Kind == (uint)StepKindC.Attempt;
            return s;
        }

        /// <summary>Whether an attempt is in progress: admitted, not yet reported.</summary>
        public bool Attempting { get { return attempting; } }

        public StepC Complete(AttemptedC attempted, Outcome outcome)
        {
            StepC s;
            Status.Check(Native.holdoff_execution_complete(handle, (uint)attempted, (uint)outcome.Kind, outcome.DelayNs(), out s));
            attempting = false;
            return s;
        }

        public StepC CompleteResponse(long status, IList<KeyValuePair<string, string>> headers)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                StepC s;
                Status.Check(Native.holdoff_execution_complete_response(handle, status, hs, (UIntPtr)hs.Length, out s));
                attempting = false;
                return s;
            }
            finally
            {
                Units.Free(allocated);
            }
        }

        public StepC Cancel()
        {
            StepC s;
            Status.Check(Native.holdoff_execution_cancel(handle, out s));
            attempting = false;
            return s;
        }

        /// <summary>Right after a wait: the caller cannot make the attempt it leads to; the C
        /// library ends the call (retries exhausted, the forgone wait as RetryAfter).</summary>
        public StepC Stop()
        {
            StepC s;
            Status.Check(Native.holdoff_execution_stop(handle, out s));
            return s;
        }

        /// <summary>During an attempt, the C library records it as cancelled (or as a timeout
        /// past its limit): a probe is never held by a call that ended in an exception.</summary>
        public void Dispose() { handle.Dispose(); }
    }
}
