// One logical call's retry loop state, shared by the async and the sync loop (Policy.Execute.cs): the
// C library's holdoff_execution decides (attempt, wait or finish, and what the caller gets); this
// file reports each attempt to it, calls the hooks, and turns its verdict into the caller's
// result or exception.
using System;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
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
                    throw new InvalidInputException("status", "holdoff: the response's status is not an HTTP status (0..999)");
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
