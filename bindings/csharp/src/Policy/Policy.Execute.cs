// The retry helpers of a Policy, their options, and their two loops: one async (ExecuteAsync and
// HoldoffHandler), one sync (Execute). What is retried, how long to wait, when to stop and what
// the caller gets are the C library's decisions (Execution.cs); the loops run each attempt with
// its own cancellation token and time limit, sleep, and call the hooks.
using System;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    public sealed partial class Policy
    {
        volatile Limits limits = Limits.Default;
        Func<TimeSpan, CancellationToken, Task> sleeper = Units.Delay;

        internal Limits CurrentLimits { get { return limits; } }

        /// <summary>Longest one attempt may take; null (the default) or Timeout.InfiniteTimeSpan:
        /// no limit of its own (the total timeout still bounds it). An attempt that outlives it
        /// has its token cancelled; an async one is left behind and counts as a timeout, a
        /// failure for the breaker; a sync one cannot be stopped and counts as what it returns
        /// or throws (an OperationCanceledException of its own token is a timeout).
        /// InvalidConfigException (an ArgumentException, ParamName execute.attempt_timeout) for
        /// zero or a negative value.</summary>
        public TimeSpan? AttemptTimeout
        {
            get { return limits.Attempt; }
            set { limits = Limits.Make(value, limits.Total); }
        }

        /// <summary>Longest a whole call may take, waits and attempts included; 60 s by default
        /// (the core's), so a call to an unreachable upstream ends within a minute. null or
        /// Timeout.InfiniteTimeSpan: no limit (the budget alone bounds the call). A wait that
        /// would not end in time gives up at once (<see cref="GiveUpReason.TotalTimeout"/>), never
        /// shortened; the last attempt gets what is left. InvalidConfigException (ParamName
        /// execute.total_timeout) for zero or a negative value.</summary>
        public TimeSpan? TotalTimeout
        {
            get { return limits.Total; }
            set { limits = Limits.Make(limits.Attempt, value); }
        }

        /// <summary>Called before each wait with the attempts so far, the delay, its source,
        /// whether the server's delay was capped, the server's delay and the last attempt's
        /// exception or value (Polly's OnRetry, tenacity's before_sleep). null: none. An exception
        /// it throws ends the call and reaches the caller.</summary>
        public Action<RetryWait> OnRetry { get; set; }

        /// <summary>Called after each attempt with its number, whether it was a probe, what it was
        /// recorded as, and its exception or value. null: none. An exception it throws ends the
        /// call and reaches the caller.</summary>
        public Action<AttemptResult> OnAttempt { get; set; }

        /// <summary>What an exception thrown by an attempt means: an outcome, or null for a
        /// programming error (rethrown at once, unretried, moving nothing). null (the default):
        /// <see cref="Outcome.Classify"/>; fall back to it for the exceptions yours does not know.
        /// The caller's own cancellation is decided before it is asked, and an async attempt cut by
        /// its time limit is a timeout (a sync one is asked about what it throws, whenever it
        /// throws it). An exception it throws (or a classifyResult throws) ends the call and
        /// reaches the caller, unretried; the attempt is recorded as cancelled (moving nothing,
        /// also past its time limit) and OnAttempt sees it so.</summary>
        public Func<Exception, Outcome?> ClassifyError { get; set; }

        /// <summary>How the helpers wait, and time each attempt: the task must complete when the
        /// delay has passed, or be cancelled by the token. The default is <see cref="Delay"/>. A
        /// test driving a ManualClock passes a function that moves it; note that the same function
        /// times an attempt for its time limit (started before a synchronous attempt, and when an
        /// asynchronous one does not complete at once), so its task must complete only once the
        /// attempt's time has passed. ArgumentNullException for null.</summary>
        public Func<TimeSpan, CancellationToken, Task> Sleeper
        {
            get { return sleeper; }
            set
            {
                if (value == null) throw new ArgumentNullException("value");
                sleeper = value;
            }
        }

        /// <summary>Runs <paramref name="fn"/> until it succeeds or the policy stops it: the
        /// breaker admits each attempt, the budget and the quota decide what is retried and how
        /// long to wait (a Retry-After is honoured as given), <see cref="AttemptTimeout"/> and
        /// <see cref="TotalTimeout"/> bound it. Each attempt gets its own token, cancelled when
        /// <paramref name="ct"/> is or when its time limit passes.
        ///
        /// Completes when an attempt succeeds. Throws: <see cref="BreakerOpenException"/> when the
        /// breaker refuses (a first attempt; a retry it would keep waiting for past the budget or
        /// the total timeout); <see cref="GiveUpException"/> for any other give-up (retries, budget
        /// or quota spent, the total timeout, a Retry-After above the cap), the last exception as
        /// its InnerException (both are <see cref="UpstreamUnavailableException"/>s); the
        /// attempt's own exception, unchanged, for a final answer, a programming error or an
        /// exception classified as a success; OperationCanceledException for
        /// <paramref name="ct"/>'s cancellation. ArgumentNullException for a null
        /// <paramref name="fn"/>.</summary>
        public Task ExecuteAsync(Func<CancellationToken, Task> fn, CancellationToken ct = default(CancellationToken))
        {
            if (fn == null) throw new ArgumentNullException("fn");
            return LoopAsync(new Func<CancellationToken, Task<object>>(async tok =>
            {
                await fn(tok).ConfigureAwait(false);
                return null;
            }), Returned<object>(null), null, null, ct);
        }

        /// <summary><see cref="ExecuteAsync(Func{CancellationToken, Task}, CancellationToken)"/>
        /// for an operation with a value: returns the last attempt's value. A
        /// <paramref name="classifyResult"/> says what a value means (null: a success); a value
        /// that ends the call as a final answer is returned, and a give-up attaches the last value
        /// as <see cref="UpstreamUnavailableException.LastResult"/>.</summary>
        public Task<T> ExecuteAsync<T>(Func<CancellationToken, Task<T>> fn, CancellationToken ct = default(CancellationToken),
            Func<T, Outcome> classifyResult = null)
        {
            if (fn == null) throw new ArgumentNullException("fn");
            return LoopAsync(fn, Returned(classifyResult), null, null, ct);
        }

        /// <summary>The synchronous <see cref="ExecuteAsync(Func{CancellationToken, Task}, CancellationToken)"/>:
        /// runs <paramref name="fn"/> on the calling thread and blocks for the waits. An attempt's
        /// time limit cancels the token it was given but cannot stop code that ignores it: then
        /// what it returns or throws counts, whenever it comes. A value returned after the limit is
        /// that attempt's value (sending the request again would not undo it); an exception thrown
        /// after it is classified as itself, as before the limit: an OperationCanceledException of
        /// the attempt's own token is a timeout, a programming error (a NullReferenceException,
        /// ...) is rethrown at once, unretried, moving nothing.</summary>
        public void Execute(Action<CancellationToken> fn, CancellationToken ct = default(CancellationToken))
        {
            if (fn == null) throw new ArgumentNullException("fn");
            Loop(tok =>
            {
                fn(tok);
                return (object)null;
            }, Returned<object>(null), ct);
        }

        /// <summary>The synchronous <see cref="ExecuteAsync{T}"/>: returns the last attempt's value.</summary>
        public T Execute<T>(Func<CancellationToken, T> fn, CancellationToken ct = default(CancellationToken),
            Func<T, Outcome> classifyResult = null)
        {
            if (fn == null) throw new ArgumentNullException("fn");
            return Loop(fn, Returned(classifyResult), ct);
        }

        static Func<Execution, T, StepC> Returned<T>(Func<T, Outcome> classify)
        {
            return (exec, v) => exec.Complete(AttemptedC.Returned, classify != null ? classify(v) : Outcome.Success);
        }

        /// <summary>The async loop: every async helper is this method.</summary>
        internal async Task<T> LoopAsync<T>(Func<CancellationToken, Task<T>> op, Func<Execution, T, StepC> report,
            Action<T> discard, Func<bool> canRetry, CancellationToken ct)
        {
            using (var run = new Run<T>(this, ct, report, discard, canRetry))
            {
                run.Start();
                while (!run.Finished)
                {
                    if (run.Attempting)
                    {
                        run.Attempted(await AttemptAsync(op, run.TimeLimit, run.Sleeper, ct).ConfigureAwait(false));
                        continue;
                    }
                    var delay = run.Waiting();
                    if (delay == null) continue;
                    try
                    {
                        await run.Sleeper(delay.Value, ct).ConfigureAwait(false);
                    }
                    catch (Exception e) when (ct.IsCancellationRequested)
                    {
                        run.CancelledInWait(e);
                        continue;
                    }
                    run.Waited();
                }
                return run.Finish();
            }
        }

        /// <summary>The sync loop: every sync helper is this method.</summary>
        T Loop<T>(Func<CancellationToken, T> op, Func<Execution, T, StepC> report, CancellationToken ct)
        {
            using (var run = new Run<T>(this, ct, report, null, null))
            {
                run.Start();
                while (!run.Finished)
                {
                    if (run.Attempting)
                    {
                        run.Attempted(Attempt(op, run.TimeLimit, run.Sleeper, ct));
                        continue;
                    }
                    var delay = run.Waiting();
                    if (delay == null) continue;
                    try
                    {
                        run.Sleeper(delay.Value, ct).GetAwaiter().GetResult();
                    }
                    catch (Exception e) when (ct.IsCancellationRequested)
                    {
                        run.CancelledInWait(e);
                        continue;
                    }
                    run.Waited();
                }
                return run.Finish();
            }
        }

        /// <summary>One async attempt with its own token, raced against the sleeper for its time
        /// limit when it does not complete at once. When the timer wins, the attempt's token is
        /// cancelled and the attempt is left to end on its own: it is a timeout.</summary>
        static async Task<Ran<T>> AttemptAsync<T>(Func<CancellationToken, Task<T>> op, TimeSpan? limit,
            Func<TimeSpan, CancellationToken, Task> sleep, CancellationToken ct)
        {
            var own = CancellationTokenSource.CreateLinkedTokenSource(ct);
            Task<T> task;
            try
            {
                task = op(own.Token);
            }
            catch (Exception e)
            {
                own.Dispose();
                return Ran<T>.Threw(e);
            }
            if (task == null)
            {
                own.Cancel();
                own.Dispose();
                return Ran<T>.HelperFailed(new InvalidOperationException("holdoff: the operation returned a null Task"));
            }
            if (limit.HasValue && !task.IsCompleted)
            {
                using (var timing = new CancellationTokenSource())
                {
                    Exception failed = null;
                    try
                    {
                        var timer = Timer(sleep, limit.Value, timing.Token);
                        if (await Task.WhenAny(task, timer).ConfigureAwait(false) != task)
                        {
                            if (timer.Status == TaskStatus.RanToCompletion)
                            {
                                Abandon(task, own);
                                return Ran<T>.OutOfTime(limit.Value);
                            }
                            timer.GetAwaiter().GetResult(); // throws the sleeper's own failure
                        }
                    }
                    catch (Exception e)
                    {
                        failed = e;
                    }
                    if (failed != null)
                    {
                        Abandon(task, own);
                        return Ran<T>.HelperFailed(failed);
                    }
                    timing.Cancel();
                }
            }
            try
            {
                return Ran<T>.Of(await task.ConfigureAwait(false));
            }
            catch (Exception e)
            {
                return Ran<T>.Threw(e);
            }
            finally
            {
                own.Dispose();
            }
        }

        /// <summary>The sleeper's task timing an attempt; InvalidOperationException for a null
        /// one.</summary>
        static Task Timer(Func<TimeSpan, CancellationToken, Task> sleep, TimeSpan limit, CancellationToken ct)
        {
            var timer = sleep(limit, ct);
            if (timer == null) throw new InvalidOperationException("holdoff: the sleeper returned a null Task");
            return timer;
        }

        /// <summary>Leaves an attempt behind: cancels its token, observes its exception and
        /// releases its token when it ends.</summary>
        static void Abandon(Task task, CancellationTokenSource own)
        {
            own.Cancel();
            Forget(task, own);
        }

        /// <summary>Observes the exception of an attempt left behind, and releases its token when
        /// it ends.</summary>
        static void Forget(Task task, CancellationTokenSource own)
        {
            task.ContinueWith(t =>
            {
                var ignored = t.Exception;
                own.Dispose();
            }, TaskContinuationOptions.ExecuteSynchronously);
        }

        /// <summary>One sync attempt with its own token; the sleeper, started first, cancels that
        /// token when the attempt's time limit passes. The attempt cannot be stopped: what it
        /// returns or throws, before or after its limit, is what it came to.</summary>
        static Ran<T> Attempt<T>(Func<CancellationToken, T> op, TimeSpan? limit,
            Func<TimeSpan, CancellationToken, Task> sleep, CancellationToken ct)
        {
            using (var own = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                AttemptTimer timer = null;
                try
                {
                    if (limit.HasValue) timer = new AttemptTimer(limit.Value, sleep, own);
                }
                catch (Exception e)
                {
                    return Ran<T>.HelperFailed(e); // before the operation ran
                }
                using (timer)
                {
                    Ran<T> ran;
                    try
                    {
                        ran = Ran<T>.Of(op(own.Token));
                    }
                    catch (Exception e)
                    {
                        ran = Ran<T>.Threw(e);
                    }
                    if (timer != null) ran.Broken = timer.Failure;
                    return ran;
                }
            }
        }

        /// <summary>Cancels a synchronous attempt's token when the sleeper says its time is up, or
        /// when the sleeper fails (the helper no longer times the attempt: it abandons it).</summary>
        sealed class AttemptTimer : IDisposable
        {
            readonly CancellationTokenSource timing = new CancellationTokenSource();
            volatile Exception failure;

            public AttemptTimer(TimeSpan limit, Func<TimeSpan, CancellationToken, Task> sleep, CancellationTokenSource attempt)
            {
                Task timer;
                try
                {
                    timer = Timer(sleep, limit, timing.Token);
                }
                catch
                {
                    timing.Dispose();
                    throw;
                }
                timer.ContinueWith(t =>
                {
                    if (t.Status == TaskStatus.Faulted)
                        failure = t.Exception.InnerExceptions.Count == 1 ? t.Exception.InnerException : t.Exception;
                    else if (t.Status != TaskStatus.RanToCompletion) return;
                    try
                    {
                        attempt.Cancel();
                    }
                    catch (ObjectDisposedException)
                    {
                        // The attempt ended as its time did.
                    }
                }, TaskContinuationOptions.ExecuteSynchronously);
            }

            public Exception Failure { get { return failure; } }

            public void Dispose()
            {
                timing.Cancel();
                timing.Dispose();
            }
        }
    }
}
