// One logical call's retry loop state, shared by the async and the sync loop (Execute.cs): the
// C library's holdoff_execution decides (attempt, wait or finish, and what the caller gets); this
// file reports each attempt to it, calls the hooks, and turns its verdict into the caller's
// result or exception.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The time limits of a call, as set (null: no limit) and as the C library takes
    /// them, checked by the core.</summary>
    internal sealed class Limits
    {
        public readonly TimeSpan? Attempt, Total;
        public readonly ExecutionOptionsC C;

        Limits(TimeSpan? attempt, TimeSpan? total, ExecutionOptionsC c)
        {
            Attempt = attempt;
            Total = total;
            C = c;
        }

        /// <summary>The core's defaults (no attempt timeout, its default total timeout).</summary>
        public static readonly Limits Default = Of(null);

        /// <summary>Limits checked by the core: HoldoffConfigException naming
        /// execute.attempt_timeout or execute.total_timeout for a zero or negative value.
        /// Timeout.InfiniteTimeSpan is no limit, as null is.</summary>
        public static Limits Make(TimeSpan? attempt, TimeSpan? total)
        {
            return Of(string.Format(CultureInfo.InvariantCulture, "{{\"execute\":{{\"attempt_timeout_ms\":{0},\"total_timeout_ms\":{1}}}}}",
                Json(attempt), Json(total)));
        }

        static string Json(TimeSpan? d)
        {
            return d.HasValue && d.Value != Timeout.InfiniteTimeSpan ? ConfigJson.Ms(d.Value) : "null";
        }

        static Limits Of(string json)
        {
            using (var c = HoldoffConfig.Parse(json ?? "{}"))
            {
                var o = c.ExecutionOptions();
                return new Limits(Span(o.AttemptTimeout, o.AttemptTimeoutNs), Span(o.TotalTimeout, o.TotalTimeoutNs), o);
            }
        }

        internal static TimeSpan? Span(uint limit, ulong ns) { return limit == (uint)LimitC.Set ? Units.Span(ns) : (TimeSpan?)null; }
    }

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

    /// <summary>What one attempt came to: a value, an exception, or its time limit passing;
    /// and the helper's own failure while running it (its sleeper's), if any.</summary>
    internal struct Ran<T>
    {
        public bool Returned, TimedOut;
        public T Value;
        public Exception Error;
        /// <summary>The helper failed running the attempt (the sleeper timing it threw, the
        /// operation gave a null Task): a programming error, reported as a bug and thrown to the
        /// caller.</summary>
        public Exception Broken;

        public static Ran<T> Of(T value) { return new Ran<T> { Returned = true, Value = value }; }
        public static Ran<T> Threw(Exception e) { return new Ran<T> { Error = e }; }

        /// <summary>An asynchronous attempt outlived <paramref name="limit"/> and was left
        /// behind.</summary>
        public static Ran<T> OutOfTime(TimeSpan limit)
        {
            var e = new TimeoutException(string.Format("holdoff: the attempt did not finish within its time limit of {0}", limit));
            return new Ran<T> { TimedOut = true, Error = e };
        }

        /// <summary>The helper failed running an asynchronous attempt (the sleeper timing it
        /// threw, the operation gave a null Task): the attempt was left behind.</summary>
        public static Ran<T> HelperFailed(Exception e) { return new Ran<T> { Broken = e }; }
    }

    /// <summary>One call's loop state: the execution, the policy's options as they were when the
    /// call started, the last attempt, and the step to take. The async and the sync loop drive
    /// it the same way: Attempted after each attempt, Waiting / Waited / CancelledInWait around
    /// each wait, Finish at the end.</summary>
    internal sealed class Run<T> : IDisposable
    {
        readonly Execution exec;
        readonly Func<Execution, T, StepC> report;
        readonly Action<T> discard;
        readonly Func<bool> canRetry;
        readonly Func<Exception, Outcome?> classify;
        readonly Action<RetryWait> onRetry;
        readonly Action<AttemptResult> onAttempt;
        public readonly Func<TimeSpan, CancellationToken, Task> Sleeper;
        public readonly CancellationToken Token;
        bool hasLast;
        Ran<T> last;
        Exception cancellation;
        StepC step;

        /// <param name="report">Reports a value the operation returned (its result classifier, or
        /// the HTTP response's status and headers).</param>
        /// <param name="discard">Releases a value that will reach no one (an HTTP response
        /// followed by a retry); may be null.</param>
        /// <param name="canRetry">Whether a further attempt can be made (a request whose content
        /// cannot be sent twice); null: always.</param>
        public Run(Policy policy, CancellationToken ct, Func<Execution, T, StepC> report, Action<T> discard, Func<bool> canRetry)
        {
            Token = ct;
            this.report = report;
            this.discard = discard;
            this.canRetry = canRetry;
            Sleeper = policy.Sleeper;
            classify = policy.ClassifyError;
            onRetry = policy.OnRetry;
            onAttempt = policy.OnAttempt;
            exec = new Execution(policy, policy.CurrentLimits);
        }

        public void Dispose() { exec.Dispose(); }

        /// <summary>Starts the call: nothing reaches the breaker for a caller already cancelled.</summary>
        public void Start()
        {
            Token.ThrowIfCancellationRequested();
            step = exec.NextStep();
        }

        public bool Finished { get { return step.Kind == (uint)StepKindC.Finish; } }
        public bool Attempting { get { return step.Kind == (uint)StepKindC.Attempt; } }

        /// <summary>The attempt's time limit (the smaller of the attempt timeout and what is left
        /// of the total timeout), or null.</summary>
        public TimeSpan? TimeLimit { get { return Units.Opt(step.HasTimeLimit, step.TimeLimitNs); } }

        /// <summary>Reports the attempt the step admitted, then calls OnAttempt. When the helper
        /// fails doing so (its sleeper failed; ClassifyError, a classifyResult or the response's
        /// reading threw, or the C library refused what they gave), the attempt is reported as a
        /// bug (recorded as cancelled, moving nothing: never by cancelling or freeing the
        /// execution, which past the attempt's limit would count a timeout), OnAttempt is
        /// called all the same, and that failure is thrown.</summary>
        public void Attempted(Ran<T> ran)
        {
            var plan = step;
            if (hasLast && last.Returned && discard != null && !ReferenceEquals(last.Value, ran.Value)) discard(last.Value);
            hasLast = true;
            last = ran;
            var broken = ran.Broken;
            if (broken == null)
            {
                try
                {
                    if (ran.Returned) step = report(exec, ran.Value);
                    // The caller's cancellation, even after the attempt's limit, ends the call (the
                    // core records that attempt as the timeout it was).
                    else if (ran.TimedOut && Token.IsCancellationRequested) step = exec.Complete(AttemptedC.Cancelled, Outcome.Cancelled);
                    else if (ran.TimedOut) step = exec.Complete(AttemptedC.Raised, Outcome.Timeout);
                    else
                    {
                        Outcome o;
                        var a = Errors.Judge(ran.Error, Token, classify, out o);
                        step = exec.Complete(a, o);
                    }
                }
                catch (Exception e)
                {
                    broken = e;
                }
            }
            if (broken != null && exec.Attempting) step = exec.Complete(AttemptedC.Bug, Outcome.Cancelled);
            if (onAttempt != null)
            {
                var recorded = Outcome.FromC(step.LastOutcome, step.LastRetryLaterNs);
                onAttempt(new AttemptResult((int)plan.Attempts, plan.Probe != 0, recorded, ran.Error, ran.Returned ? (object)ran.Value : null));
            }
            if (broken != null)
            {
                // The caller gets the helper's failure, not the value: it reaches no one.
                DiscardLast();
                ExceptionDispatchInfo.Capture(broken).Throw();
            }
        }

        /// <summary>Before a wait: calls OnRetry and returns the delay; null when the call cannot
        /// make another attempt (a request it cannot send again), which the C library then ends
        /// (retries exhausted, the forgone wait as RetryAfter).</summary>
        public TimeSpan? Waiting()
        {
            var delay = Units.Span(step.DelayNs);
            var server = Units.Opt(step.HasServerDelay, step.ServerDelayNs);
            if (hasLast && canRetry != null && !canRetry())
            {
                step = exec.Stop();
                return null;
            }
            if (onRetry != null)
                onRetry(new RetryWait((int)step.Attempts, delay, (WaitSource)step.Source, step.Capped != 0, server, LastError, LastResult));
            return delay;
        }

        public void Waited() { step = exec.NextStep(); }

        /// <summary>The caller cancelled during a wait (<paramref name="e"/>: what the sleeper
        /// threw).</summary>
        public void CancelledInWait(Exception e)
        {
            cancellation = e;
            step = exec.Cancel();
        }

        Exception LastError { get { return hasLast && !last.Returned ? last.Error : null; } }
        object LastResult { get { return hasLast && last.Returned ? (object)last.Value : null; } }

        void DiscardLast()
        {
            if (hasLast && last.Returned && discard != null) discard(last.Value);
        }

        /// <summary>The verdict as the caller's result (the contract's surface table).</summary>
        public T Finish()
        {
            var s = step;
            switch ((VerdictC)s.Verdict)
            {
                case VerdictC.Return:
                    if (!hasLast || !last.Returned) break;
                    return last.Value;
                case VerdictC.Rethrow:
                    if (LastError == null) break;
                    ExceptionDispatchInfo.Capture(LastError).Throw();
                    break;
                case VerdictC.BreakerOpen:
                    throw new BreakerOpenException((int)s.Attempts, Units.Opt(s.HasRetryAfter, s.RetryAfterNs), LastError, LastResult);
                case VerdictC.GiveUp:
                    throw new GiveUpException((GiveUpReason)s.Reason, (int)s.Attempts, Units.Opt(s.HasRetryAfter, s.RetryAfterNs),
                        Units.Opt(s.HasServerDelay, s.ServerDelayNs), s.Capped != 0, LastError, LastResult);
                case VerdictC.Cancelled:
                    DiscardLast();
                    throw Cancelled();
                case VerdictC.InvalidInput:
                    DiscardLast();
                    throw new HoldoffInputException("status", "holdoff: the response's status is not an HTTP status (0..999)");
            }
            throw new InvalidOperationException(string.Format("holdoff: the verdict {0} does not match the last attempt",
                Native.Str(Native.holdoff_verdict_name(s.Verdict))));
        }

        /// <summary>The caller's cancellation: the OperationCanceledException of its own token
        /// when the attempt or the sleeper threw one, else a new one for that token.</summary>
        Exception Cancelled()
        {
            var seen = cancellation ?? LastError;
            var oce = seen != null ? Errors.Unwrap(seen) as OperationCanceledException : null;
            if (oce != null && oce.CancellationToken == Token) ExceptionDispatchInfo.Capture(oce).Throw();
            return new OperationCanceledException("holdoff: the call was cancelled", seen, Token);
        }
    }
}
