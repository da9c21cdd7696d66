// How an exception thrown by an attempt is counted: the caller's own cancellation, the default
// table of the conformance contract (conformance/README.md, "Execute"), or the caller's
// classifier. Any exception the table does not list is a programming error: rethrown at once,
// unretried, recorded as cancelled so that it moves nothing.
using System;
using System.Threading;
using Holdoff.Interop;

namespace Holdoff
{
    internal static class Errors
    {
        /// <summary>The one exception inside an AggregateException (what .Wait() and .Result
        /// wrap), else <paramref name="e"/> itself.</summary>
        public static Exception Unwrap(Exception e)
        {
            var agg = e as AggregateException;
            while (agg != null && agg.InnerExceptions.Count == 1)
            {
                e = agg.InnerExceptions[0];
                agg = e as AggregateException;
            }
            return e;
        }

        /// <summary>What an attempt that threw <paramref name="e"/> came to: Cancelled when the
        /// caller's <paramref name="ct"/> is cancelled and <paramref name="e"/> is an
        /// OperationCanceledException; otherwise Raised with the outcome <paramref name="classify"/>
        /// (<see cref="Outcome.Classify"/> when null) gives, or Bug when it gives null.</summary>
        public static AttemptedC Judge(Exception e, CancellationToken ct, Func<Exception, Outcome?> classify, out Outcome outcome)
        {
            outcome = Outcome.Cancelled;
            if (ct.IsCancellationRequested && Unwrap(e) is OperationCanceledException) return AttemptedC.Cancelled;
            var o = classify != null ? classify(e) : Outcome.Classify(e);
            if (!o.HasValue) return AttemptedC.Bug;
            outcome = o.Value;
            return AttemptedC.Raised;
        }
    }
}
