// API tests of the retry helpers: Policy.ExecuteAsync / Execute, their options and hooks, the
// default classification, what the caller gets, per-attempt tokens and time limits (on the
// manual clock), and the struct layouts the helpers exchange with the C library.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        /// <summary>Only turns a deadlock into a failure.</summary>
        static readonly TimeSpan Watchdog = TimeSpan.FromSeconds(30);

        static void ExecuteHelpers()
        {
            Layouts();
            ExecuteOptions();
            ExecuteNullArguments();
            DefaultClassification();
            ExecuteSurface();
            ExecuteSurfaceSync();
            PerAttemptTokens();
            AttemptTimeouts();
            Cancellation();
            BreakerExecuteAsync();
            PastTheLimit();
            HelperFailures();
            CancelledAfterTheTimer();
        }

        static int Offset(Type t, string field) { return Marshal.OffsetOf(t, field).ToInt32(); }

        static void Layouts()
        {
            var s = typeof(StepC);
            Check(Marshal.SizeOf(s) == 72, "holdoff_step is 72 bytes: " + Marshal.SizeOf(s));
            string[] fields = { "TimeLimitNs", "DelayNs", "ServerDelayNs", "RetryAfterNs", "LastRetryLaterNs", "Kind", "Attempts", "Source",
                "Verdict", "Reason", "LastOutcome", "Probe", "Capped", "HasTimeLimit", "HasServerDelay", "HasRetryAfter", "HasReason",
                "HasLastOutcome", "Reserved" };
            int[] offsets = { 0, 8, 16, 24, 32, 40, 44, 48, 52, 56, 60, 64, 65, 66, 67, 68, 69, 70, 71 };
            for (int i = 0; i < fields.Length; i++)
                Check(Offset(s, fields[i]) == offsets[i], "holdoff_step." + fields[i] + " at " + offsets[i] + ": " + Offset(s, fields[i]));
            var o = typeof(ExecutionOptionsC);
            Check(Marshal.SizeOf(o) == 32 && Offset(o, "StructSize") == 0 && Offset(o, "AttemptTimeoutNs") == 8 && Offset(o, "TotalTimeoutNs") == 16
                && Offset(o, "AttemptTimeout") == 24 && Offset(o, "TotalTimeout") == 28, "holdoff_execution_options: 32 bytes, its offsets");
            ExecutionOptionsC init;
            Check(Native.holdoff_execution_options_init(out init) == 0 && (int)(ulong)init.StructSize == Marshal.SizeOf(o)
                && init.AttemptTimeout == (uint)LimitC.Default && init.TotalTimeout == (uint)LimitC.Default, "the library's struct_size is ours");
        }

        static void ExecuteOptions()
        {
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            {
                Check(p.AttemptTimeout == null && p.TotalTimeout == TimeSpan.FromSeconds(60), "defaults: no attempt timeout, 60 s in total");
                Check(p.OnRetry == null && p.OnAttempt == null && p.ClassifyError == null && p.Sleeper != null, "no hooks, the default sleeper");
                p.AttemptTimeout = TimeSpan.FromMilliseconds(2500);
                Check(p.AttemptTimeout == TimeSpan.FromMilliseconds(2500) && p.TotalTimeout == TimeSpan.FromSeconds(60), "set the attempt timeout");
                p.TotalTimeout = Timeout.InfiniteTimeSpan;
                Check(p.TotalTimeout == null, "Timeout.InfiniteTimeSpan is no limit, read back as null");
                p.TotalTimeout = TimeSpan.FromSeconds(5);
                p.TotalTimeout = null;
                Check(p.TotalTimeout == null && p.AttemptTimeout == TimeSpan.FromMilliseconds(2500), "null is no limit");
                foreach (var bad in new[] { TimeSpan.Zero, TimeSpan.FromSeconds(-1), TimeSpan.FromTicks(-1) })
                {
                    var e = Throws<InvalidConfigException>(() => p.AttemptTimeout = bad, "attempt timeout " + bad);
                    Check(e != null && e.ParamName == "execute.attempt_timeout", "the core names execute.attempt_timeout for " + bad);
                    e = Throws<InvalidConfigException>(() => p.TotalTimeout = bad, "total timeout " + bad);
                    Check(e != null && e.ParamName == "execute.total_timeout", "the core names execute.total_timeout for " + bad);
                }
                var far = Throws<InvalidConfigException>(() => p.TotalTimeout = TimeSpan.FromDays(365 * 600), "600 years");
                Check(far != null && far.ParamName == "execute.total_timeout", "a limit past 2^64 ns is refused, not shortened");
                Check(p.AttemptTimeout == TimeSpan.FromMilliseconds(2500) && p.TotalTimeout == null, "a refused value changes nothing");
                var ne = Throws<ArgumentNullException>(() => p.Sleeper = null, "null sleeper");
                Check(ne != null && ne.ParamName == "value", "ParamName of a null sleeper");
            }
            using (var c = HoldoffConfig.Parse("{\"execute\":{\"attempt_timeout_ms\":250,\"total_timeout_ms\":null}}"))
                Check(c.Parts == ConfigParts.Execute && c.AttemptTimeout == TimeSpan.FromMilliseconds(250) && c.TotalTimeout == null,
                    "the neutral configuration's execute part");
            using (var c = HoldoffConfig.Parse("{}"))
                Check(c.Parts == ConfigParts.None && c.AttemptTimeout == null && c.TotalTimeout == TimeSpan.FromSeconds(60), "execute absent: defaults");
            var ce = Throws<InvalidConfigException>(() => HoldoffConfig.Parse("{\"execute\":{\"total_timeout_ms\":0}}").Dispose(), "total_timeout_ms 0");
            Check(ce != null && ce.ParamName == "execute.total_timeout", "total_timeout_ms 0 names execute.total_timeout");
        }

        static void ExecuteNullArguments()
        {
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var b = new Breaker(new BreakerOptions(), clock))
            {
                var e = Throws<ArgumentNullException>(() => p.ExecuteAsync((Func<CancellationToken, Task>)null), "ExecuteAsync(null)");
                Check(e != null && e.ParamName == "fn", "ExecuteAsync names fn");
                e = Throws<ArgumentNullException>(() => p.ExecuteAsync<int>(null), "ExecuteAsync<T>(null)");
                Check(e != null && e.ParamName == "fn", "ExecuteAsync<T> names fn");
                e = Throws<ArgumentNullException>(() => p.Execute((Action<CancellationToken>)null), "Execute(null)");
                Check(e != null && e.ParamName == "fn", "Execute names fn");
                e = Throws<ArgumentNullException>(() => p.Execute<int>((Func<CancellationToken, int>)null), "Execute<T>(null)");
                Check(e != null && e.ParamName == "fn", "Execute<T> names fn");
                e = Throws<ArgumentNullException>(() => new HoldoffHandler(null).Dispose(), "HoldoffHandler(null)");
                Check(e != null && e.ParamName == "policy", "HoldoffHandler names policy");
                Throws<ArgumentNullException>(() => new HoldoffHandler(p, null).Dispose(), "HoldoffHandler(policy, null)");
                e = Throws<ArgumentNullException>(() => new HoldoffHandler(null, new HttpClientHandler()).Dispose(), "HoldoffHandler(null, inner)");
                Check(e != null && e.ParamName == "policy", "HoldoffHandler(null, inner) names policy");
                e = Throws<ArgumentNullException>(() => Outcome.Classify(null), "Classify(null)");
                Check(e != null && e.ParamName == "error", "Classify names error");
                e = Throws<ArgumentNullException>(() => b.ExecuteAsync(null), "Breaker.ExecuteAsync(null)");
                Check(e != null && e.ParamName == "fn" && b.Snapshot().Probes == 0, "Breaker.ExecuteAsync names fn");
            }
        }

        static void DefaultClassification()
        {
            var failures = new Exception[]
            {
                new HttpRequestException("refused"), new SocketException((int)SocketError.ConnectionRefused), new IOException("reset"),
                new WebException("refused", WebExceptionStatus.ConnectFailure), new AggregateException(new SocketException()),
            };
            foreach (var e in failures) Check(Outcome.Classify(e) == Outcome.Failure, e.GetType().Name + " is a failure");
            var timeouts = new Exception[]
            {
                new TimeoutException(), new TaskCanceledException(), new OperationCanceledException(),
                new WebException("slow", WebExceptionStatus.Timeout),
            };
            foreach (var e in timeouts) Check(Outcome.Classify(e) == Outcome.Timeout, e.GetType().Name + " is a timeout");
            Check(Outcome.Classify(new RetryLaterException(TimeSpan.FromSeconds(3))) == Outcome.RetryLater(TimeSpan.FromSeconds(3)),
                "RetryLaterException is a retry-later with its delay");
            var bugs = new Exception[]
            {
                new NullReferenceException(), new ArgumentException("x"), new InvalidOperationException(), new KeyNotFoundException(),
                new AggregateException(new IOException(), new IOException()),
            };
            foreach (var e in bugs) Check(Outcome.Classify(e) == null, e.GetType().Name + " is a programming error");
            var re = Throws<ArgumentOutOfRangeException>(() => new RetryLaterException(TimeSpan.FromSeconds(-1)), "negative retry-later");
            Check(re != null && re.ParamName == "delay", "a negative retry-later names delay");
        }

        /// <summary>A policy on <paramref name="clock"/> whose waits move it, recording the hooks.</summary>
        static Policy HookedPolicy(ManualClock clock, PolicyOptions options, List<RetryWait> waits, List<AttemptResult> attempts)
        {
            var p = new Policy(options ?? new PolicyOptions(), clock);
            new TestTime(clock).Attach(p, waits.Add);
            p.OnAttempt = attempts.Add;
            return p;
        }

        static PolicyOptions Retries(int n)
        {
            return new PolicyOptions { Budget = new BudgetOptions { MaxRetries = n } };
        }

        static T Await<T>(Task<T> t) { return t.GetAwaiter().GetResult(); }

        /// <summary>Whether <paramref name="t"/> ended (however) before the watchdog.</summary>
        static bool Ended(Task t)
        {
            try
            {
                t.Wait(Watchdog);
            }
            catch (AggregateException)
            {
            }
            return t.IsCompleted;
        }

        static void ExecuteSurface()
        {
            var waits = new List<RetryWait>();
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            {
                using (var p = HookedPolicy(clock, null, waits, attempts))
                {
                    var v = new object();
                    Check(ReferenceEquals(Await(p.ExecuteAsync(ct => Task.FromResult(v))), v) && attempts.Count == 1 && waits.Count == 0,
                        "a success returns the value itself");
                    attempts.Clear();
                    int n = 0;
                    var refused = new SocketException((int)SocketError.ConnectionRefused);
                    var got = Await(p.ExecuteAsync(async ct =>
                    {
                        await Task.Yield();
                        n++;
                        if (n == 1) throw refused;
                        if (n == 2) throw new RetryLaterException(TimeSpan.FromSeconds(2));
                        return "ok";
                    }));
                    Check(got == "ok" && n == 3, "retried until the success");
                    Check(waits.Count == 2 && waits[0].Delay == TimeSpan.FromMilliseconds(500) && waits[0].Source == WaitSource.Backoff
                        && waits[0].Attempts == 1 && ReferenceEquals(waits[0].LastError, refused)
                        && waits[1].Delay == TimeSpan.FromSeconds(2) && waits[1].Source == WaitSource.RetryAfter && waits[1].ServerDelay == TimeSpan.FromSeconds(2),
                        "OnRetry saw the backoff, then the Retry-After");
                    Check(attempts.Count == 3 && attempts[0].Outcome == Outcome.Failure && attempts[1].Outcome == Outcome.RetryLater(TimeSpan.FromSeconds(2))
                        && attempts[2].Outcome == Outcome.Success && attempts[2].Number == 3 && (string)attempts[2].Result == "ok",
                        "OnAttempt saw each attempt as recorded: " + string.Join(", ", attempts));
                    Check(clock.Now == TimeSpan.FromMilliseconds(2500), "the waits moved the manual clock: " + clock.Now);
                }
                using (var p = HookedPolicy(clock, Retries(1), waits, attempts))
                {
                    attempts.Clear();
                    var last = new IOException("reset");
                    int n = 0;
                    var gu = Throws<GiveUpException>(() => Await(p.ExecuteAsync<int>(ct =>
                    {
                        n++;
                        throw n == 1 ? new IOException("first") : last;
                    })), "retries exhausted");
                    Check(gu is UpstreamUnavailableException && gu.Reason == GiveUpReason.AttemptsExhausted && gu.Attempts == 2
                        && ReferenceEquals(gu.InnerException, last) && gu.LastResult == null && !gu.Capped && gu.ServerDelay == null,
                        "give-up: an upstream unavailable, the last exception as its InnerException");
                    var value = new object();
                    gu = Throws<GiveUpException>(() => Await(p.ExecuteAsync(ct => Task.FromResult(value), classifyResult: x => Outcome.Failure)),
                        "values classified as failures");
                    Check(gu != null && ReferenceEquals(gu.LastResult, value) && gu.InnerException == null && gu.Attempts == 2,
                        "a give-up attaches the last value");
                    var answer = new object();
                    Check(ReferenceEquals(Await(p.ExecuteAsync(ct => Task.FromResult(answer), classifyResult: x => Outcome.Answer)), answer),
                        "a value classified as an answer is returned");
                    p.ClassifyError = e => e is KeyNotFoundException ? Outcome.Answer : Outcome.Classify(e);
                    var notFound = new KeyNotFoundException("404");
                    attempts.Clear();
                    var kn = Throws<KeyNotFoundException>(() => p.ExecuteAsync(ct => { throw notFound; }).GetAwaiter().GetResult(), "an answer");
                    Check(ReferenceEquals(kn, notFound) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Answer,
                        "an exception classified as an answer is rethrown unchanged, not retried");
                    p.ClassifyError = null;
                    attempts.Clear();
                    long failures = (long)p.Breaker.Snapshot().Failures;
                    var bug = new NullReferenceException("a bug");
                    var nre = Throws<NullReferenceException>(() => p.ExecuteAsync(ct => { throw bug; }).GetAwaiter().GetResult(), "a programming error");
                    Check(ReferenceEquals(nre, bug) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled
                        && (long)p.Breaker.Snapshot().Failures == failures, "a programming error is rethrown at once and moves nothing");
                    Check(nre.StackTrace != null && nre.StackTrace.Contains("ExecuteSurface"), "its stack trace is kept");
                    p.Breaker.ForceOpen();
                    int calls = 0;
                    var open = Throws<BreakerOpenException>(() => Await(p.ExecuteAsync(ct => { calls++; return Task.FromResult(1); })), "forced open");
                    Check(open is UpstreamUnavailableException && open.Reason == GiveUpReason.BreakerOpen && open.Attempts == 0
                        && open.RetryAfter == null && open.InnerException == null && open.LastResult == null && open.State == null && calls == 0,
                        "the breaker's refusal: an upstream unavailable, no attempt");
                    p.Breaker.Reset();
                }
            }
        }

        static void ExecuteSurfaceSync()
        {
            var waits = new List<RetryWait>();
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            using (var p = HookedPolicy(clock, Retries(1), waits, attempts))
            {
                int n = 0;
                Check(p.Execute(ct => ++n == 1 ? Fail<int>(new HttpRequestException("503")) : 42) == 42 && n == 2 && waits.Count == 1
                    && clock.Now == TimeSpan.FromMilliseconds(500), "sync: retried after the backoff, the value returned");
                int ran = 0;
                p.Execute(ct => { ran++; });
                Check(ran == 1, "sync Action ran once");
                var last = new SocketException();
                n = 0;
                var gu = Throws<GiveUpException>(() => p.Execute(ct => ++n == 1 ? Fail<int>(new SocketException()) : Fail<int>(last)), "sync give-up");
                Check(gu != null && gu.Attempts == 2 && ReferenceEquals(gu.InnerException, last), "sync give-up carries the last exception");
                var bug = new InvalidOperationException("a bug");
                attempts.Clear();
                var ioe = Throws<InvalidOperationException>(() => p.Execute(ct => Fail<int>(bug)), "sync programming error");
                Check(ReferenceEquals(ioe, bug) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled, "sync: a bug is rethrown at once");
                var v = new object();
                var got = Throws<GiveUpException>(() => p.Execute(ct => v, classifyResult: x => Outcome.Failure), "sync values classified as failures");
                Check(got != null && ReferenceEquals(got.LastResult, v), "sync give-up attaches the last value");
            }
        }

        static T Fail<T>(Exception e) { throw e; }

        static Task<T> Hang<T>(CancellationToken ct)
        {
            var t = new TaskCompletionSource<T>();
            ct.Register(() => t.TrySetCanceled());
            return t.Task;
        }

        static void PerAttemptTokens()
        {
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var caller = new CancellationTokenSource())
            {
                new TestTime(clock).Attach(p);
                var tokens = new List<CancellationToken>();
                Await(p.ExecuteAsync(ct =>
                {
                    tokens.Add(ct);
                    if (tokens.Count < 3) throw new SocketException();
                    return Task.FromResult(1);
                }, caller.Token));
                Check(tokens.Count == 3 && tokens[0] != caller.Token && tokens[0] != tokens[1] && tokens[1] != tokens[2]
                    && tokens.TrueForAll(t => t.CanBeCanceled && !t.IsCancellationRequested), "async: each attempt has its own token");
                tokens.Clear();
                p.Execute(ct =>
                {
                    tokens.Add(ct);
                    if (tokens.Count < 2) throw new SocketException();
                }, caller.Token);
                Check(tokens.Count == 2 && tokens[0] != caller.Token && tokens[0] != tokens[1], "sync: each attempt has its own token");
                var attempts = new List<AttemptResult>();
                p.OnAttempt = attempts.Add;
                CancellationToken seen = default(CancellationToken);
                var oce = Throws<OperationCanceledException>(() => Await(p.ExecuteAsync<int>(ct =>
                {
                    seen = ct;
                    caller.Cancel();
                    Check(ct.IsCancellationRequested, "the caller's cancellation reaches the attempt's token");
                    ct.ThrowIfCancellationRequested();
                    return Task.FromResult(1);
                }, caller.Token)), "the caller cancels during the attempt");
                Check(oce != null && oce.CancellationToken == caller.Token && seen != caller.Token,
                    "the caller gets a cancellation of its own token");
                Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && p.Breaker.Snapshot().Failures == 0,
                    "the cancelled attempt is recorded as cancelled, not retried");
            }
        }

        static void AttemptTimeouts()
        {
            using (var clock = new ManualClock())
            using (var p = new Policy(Retries(1), clock))
            using (var caller = new CancellationTokenSource())
            {
                var time = new TestTime(clock);
                time.Attach(p);
                var attempts = new List<AttemptResult>();
                p.OnAttempt = attempts.Add;
                p.AttemptTimeout = TimeSpan.FromMilliseconds(100);
                var tokens = new List<CancellationToken>();
                var call = p.ExecuteAsync(ct =>
                {
                    tokens.Add(ct);
                    return tokens.Count == 1 ? Hang<int>(ct) : Task.FromResult(7);
                }, caller.Token);
                Check(!call.IsCompleted && time.Pending == 1, "a hanging attempt is timed by the sleeper");
                time.Advance(TimeSpan.FromMilliseconds(99));
                Check(!call.IsCompleted, "not before its time limit");
                time.Advance(TimeSpan.FromMilliseconds(1));
                Check(Ended(call) && call.Status == TaskStatus.RanToCompletion && call.Result == 7, "cut at 100 ms, retried after the backoff");
                Check(tokens.Count == 2 && tokens[0].IsCancellationRequested && !tokens[1].IsCancellationRequested && !caller.IsCancellationRequested,
                    "the time limit cancelled that attempt's token only");
                Check(attempts.Count == 2 && attempts[0].Outcome == Outcome.Timeout && attempts[0].Error is TimeoutException
                    && attempts[1].Outcome == Outcome.Success, "the deadline is a timeout, not a cancellation");
                Check(clock.Now == TimeSpan.FromMilliseconds(600) && p.Breaker.Snapshot().Failures == 0, "the success reset the failure count");

                // A timeout not from the caller's token (HttpClient's own) is a timeout too.
                attempts.Clear();
                int n = 0;
                Await(p.ExecuteAsync(ct => ++n == 1 ? Fail<Task<int>>(new TaskCanceledException()) : Task.FromResult(1), caller.Token));
                Check(attempts.Count == 2 && attempts[0].Outcome == Outcome.Timeout, "a TaskCanceledException of another token is a timeout");

                // Synchronous: the timer cancels the token; the operation's exception after it counts
                // as itself (the cancellation of its own token: a timeout).
                attempts.Clear();
                p.AttemptTimeout = TimeSpan.FromMilliseconds(50);
                using (var started = new ManualResetEventSlim())
                {
                    n = 0;
                    OperationCanceledException thrown = null;
                    var sync = Task.Run(() => p.Execute(ct =>
                    {
                        if (++n > 1) return 2;
                        started.Set();
                        ct.WaitHandle.WaitOne(Watchdog);
                        thrown = new OperationCanceledException(ct);
                        throw thrown;
                    }, caller.Token));
                    Check(started.Wait(Watchdog), "the sync attempt started");
                    time.Advance(TimeSpan.FromMilliseconds(50));
                    Check(Ended(sync) && sync.Status == TaskStatus.RanToCompletion && sync.Result == 2 && attempts.Count == 2 && attempts[0].Outcome == Outcome.Timeout
                        && ReferenceEquals(attempts[0].Error, thrown),
                        "sync: cut at its limit, what it threw (its own token's cancellation) is a timeout");
                }

                // Without retries, a hanging attempt gives up with the timeout attached, and counts for the breaker.
                p.AttemptTimeout = null;
                p.TotalTimeout = TimeSpan.FromSeconds(1);
                var alone = p.ExecuteAsync(ct => Hang<int>(ct), caller.Token);
                time.Advance(TimeSpan.FromSeconds(1));
                Check(Ended(alone), "the total timeout ended it");
                var gu = alone.Exception != null ? alone.Exception.InnerException as GiveUpException : null;
                Check(gu != null && gu.Reason == GiveUpReason.TotalTimeout && gu.Attempts == 1 && gu.InnerException is TimeoutException
                    && p.Breaker.Snapshot().Failures == 1, "the total timeout cut the attempt: a timeout, then total_timeout");
            }
        }

        /// <summary>A policy whose breaker opens on one failure, with one retry, a 100 ms attempt
        /// timeout, its sleeper on <paramref name="time"/>, recording the attempts.</summary>
        static Policy Fragile(TestTime time, List<AttemptResult> attempts)
        {
            var o = Retries(1);
            o.Breaker = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1) };
            var p = new Policy(o, time.Clock);
            time.Attach(p);
            p.OnAttempt = attempts.Add;
            p.AttemptTimeout = TimeSpan.FromMilliseconds(100);
            return p;
        }

        /// <summary>Whether the breaker of <paramref name="p"/> is untouched: closed, no failure.</summary>
        static bool Untouched(Policy p)
        {
            var s = p.Breaker.Snapshot();
            return s.State == State.Closed && s.Failures == 0;
        }

        /// <summary>A sync attempt cannot be stopped at its limit: what it throws after it counts
        /// as itself, a programming error included (rethrown at once, moving nothing).</summary>
        static void PastTheLimit()
        {
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            {
                var time = new TestTime(clock);
                using (var p = Fragile(time, attempts))
                {
                    int n = 0;
                    bool cut = false;
                    var bug = new NullReferenceException("past the limit");
                    var nre = Throws<NullReferenceException>(() => p.Execute(ct =>
                    {
                        if (++n > 1) return 2;
                        time.Advance(TimeSpan.FromMilliseconds(150));
                        cut = ct.IsCancellationRequested;
                        throw bug;
                    }), "sync: a programming error after the limit");
                    Check(ReferenceEquals(nre, bug) && cut && n == 1, "sync: a programming error after the limit is rethrown at once, unretried");
                    Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && ReferenceEquals(attempts[0].Error, bug),
                        "sync: it is recorded as cancelled, not as a timeout: " + string.Join(", ", attempts));
                    Check(Untouched(p), "sync: a programming error after the limit moves nothing (the breaker stays closed)");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did

                    attempts.Clear();
                    n = 0;
                    var refused = new SocketException((int)SocketError.ConnectionRefused);
                    Check(p.Execute(ct =>
                    {
                        if (++n > 1) return 3;
                        time.Advance(TimeSpan.FromMilliseconds(150));
                        throw refused;
                    }) == 3 && n == 2, "sync: a transport error after the limit is retried");
                    Check(attempts.Count == 2 && attempts[0].Outcome == Outcome.Failure && ReferenceEquals(attempts[0].Error, refused),
                        "sync: a transport error after the limit is a failure, not a timeout");
                }
            }
        }

        /// <summary>The helper failing while reporting an attempt (a classifier that throws or
        /// gives garbage, a sleeper that fails, a response that is none) is a programming error:
        /// the attempt is recorded as cancelled, also past its limit (never by disposing the
        /// execution, which would count a timeout), OnAttempt sees it, and the failure reaches
        /// the caller.</summary>
        static void HelperFailures()
        {
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            {
                var time = new TestTime(clock);
                using (var p = Fragile(time, attempts))
                {
                    var oops = new FormatException("the classifier's bug");
                    p.ClassifyError = e => { throw oops; };
                    int n = 0;
                    var refused = new SocketException((int)SocketError.ConnectionRefused);
                    var fe = Throws<FormatException>(() => p.Execute<int>(ct =>
                    {
                        n++;
                        time.Advance(TimeSpan.FromMilliseconds(150));
                        throw refused;
                    }), "sync: ClassifyError throws after the limit");
                    Check(ReferenceEquals(fe, oops) && n == 1, "sync: the classifier's exception reaches the caller, unretried");
                    Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && ReferenceEquals(attempts[0].Error, refused),
                        "sync: OnAttempt saw the attempt, recorded as cancelled: " + string.Join(", ", attempts));
                    Check(Untouched(p), "sync: a classifier throwing after the limit moves nothing (the breaker stays closed)");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                    p.ClassifyError = null;

                    attempts.Clear();
                    n = 0;
                    var value = new object();
                    fe = Throws<FormatException>(() => p.Execute(ct =>
                    {
                        n++;
                        time.Advance(TimeSpan.FromMilliseconds(150));
                        return value;
                    }, classifyResult: v => { throw oops; }), "sync: classifyResult throws after the limit");
                    Check(ReferenceEquals(fe, oops) && n == 1 && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled
                        && ReferenceEquals(attempts[0].Result, value) && Untouched(p),
                        "sync: a classifyResult throwing after the limit: rethrown, seen by OnAttempt as cancelled, moving nothing");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did

                    attempts.Clear();
                    p.ClassifyError = e => Outcome.RetryLater(TimeSpan.FromSeconds(-1));
                    var aoore = Throws<ArgumentOutOfRangeException>(() => Await(p.ExecuteAsync<int>(ct => { throw refused; })),
                        "async: ClassifyError gives a negative retry-later");
                    Check(aoore != null && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "async: a classifier's garbage is a programming error; OnAttempt saw it as cancelled");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                    p.ClassifyError = null;

                    attempts.Clear();
                    fe = Throws<FormatException>(() => Await(p.ExecuteAsync(ct => Task.FromResult(value), classifyResult: v => { throw oops; })),
                        "async: classifyResult throws");
                    Check(ReferenceEquals(fe, oops) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "async: a classifyResult throwing is rethrown; OnAttempt saw the attempt as cancelled");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did

                    attempts.Clear();
                    var ioe = Throws<InvalidOperationException>(() => Await(p.ExecuteAsync<int>(ct => null)), "async: a null Task");
                    Check(ioe != null && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "async: an operation giving a null Task: rethrown, OnAttempt saw it as cancelled");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                }
            }

            // The sleeper timing an attempt fails once the attempt is past its limit: the helper's
            // failure, not a timeout of the upstream; the attempt's token is cancelled.
            using (var clock = new ManualClock())
            {
                var broken = new FormatException("the sleeper's bug");
                Func<TimeSpan, CancellationToken, Task> sleeper = (d, ct) =>
                {
                    clock.Advance(TimeSpan.FromMilliseconds(200));
                    var t = new TaskCompletionSource<bool>();
                    t.SetException(broken);
                    return t.Task;
                };
                var time = new TestTime(clock);
                using (var p = Fragile(time, attempts))
                {
                    p.Sleeper = sleeper;
                    attempts.Clear();
                    CancellationToken seen = default(CancellationToken);
                    var fe = Throws<FormatException>(() => Await(p.ExecuteAsync(ct =>
                    {
                        seen = ct;
                        return Hang<int>(ct);
                    })), "async: the sleeper fails");
                    Check(ReferenceEquals(fe, broken) && seen.IsCancellationRequested, "async: the sleeper's failure reaches the caller; the attempt's token is cancelled");
                    Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "async: OnAttempt saw the attempt as cancelled; the breaker stays closed: " + string.Join(", ", attempts));
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did

                    attempts.Clear();
                    bool cut = false;
                    fe = Throws<FormatException>(() => p.Execute(ct =>
                    {
                        cut = ct.IsCancellationRequested;
                        return 1;
                    }), "sync: the sleeper fails");
                    Check(ReferenceEquals(fe, broken) && cut, "sync: the sleeper's failure reaches the caller; the attempt's token is cancelled");
                    Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "sync: OnAttempt saw the attempt as cancelled; the breaker stays closed");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did

                    // A sleeper that throws instead of returning a task.
                    p.Sleeper = (d, ct) => { clock.Advance(TimeSpan.FromMilliseconds(200)); throw broken; };
                    attempts.Clear();
                    fe = Throws<FormatException>(() => Await(p.ExecuteAsync(ct => Hang<int>(ct))), "async: the sleeper throws");
                    Check(ReferenceEquals(fe, broken) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "async: a sleeper that throws: rethrown, the attempt recorded as cancelled");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                    attempts.Clear();
                    fe = Throws<FormatException>(() => p.Execute(ct => 1), "sync: the sleeper throws");
                    Check(ReferenceEquals(fe, broken) && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled && Untouched(p),
                        "sync: a sleeper that throws: rethrown, the attempt recorded as cancelled");
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                }
            }

            // The inner handler gives no response.
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            {
                attempts.Clear();
                p.OnAttempt = attempts.Add;
                using (var client = new HttpClient(new HoldoffHandler(p, new NoResponse())) { Timeout = Timeout.InfiniteTimeSpan })
                {
                    var e = Throws<Exception>(() => client.GetAsync("http://upstream.invalid/").GetAwaiter().GetResult(), "no response");
                    Check(e is InvalidOperationException && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled
                        && Untouched(p), "http: no response is the helper's failure; OnAttempt saw it as cancelled: " + e);
                    p.Breaker.Reset(); // the next scenario starts afresh, whatever this one did
                }
            }
        }

        /// <summary>The caller cancelling just after an async attempt's timer won still ends the
        /// call with its cancellation (no give-up); the breaker counts the attempt as the timeout
        /// it was.</summary>
        static void CancelledAfterTheTimer()
        {
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            using (var p = new Policy(Retries(0), clock))
            using (var caller = new CancellationTokenSource())
            {
                var timer = new TaskCompletionSource<bool>();
                p.OnAttempt = attempts.Add;
                p.AttemptTimeout = TimeSpan.FromMilliseconds(100);
                p.Sleeper = (d, ct) =>
                {
                    // Runs before the helper sees the timer complete.
                    timer.Task.ContinueWith(t => caller.Cancel(), TaskContinuationOptions.ExecuteSynchronously);
                    return timer.Task;
                };
                var call = p.ExecuteAsync(ct => new TaskCompletionSource<int>().Task, caller.Token); // ignores its token
                clock.Advance(TimeSpan.FromMilliseconds(100));
                timer.SetResult(true);
                Check(Ended(call), "the call ended");
                var oce = Throws<OperationCanceledException>(() => call.GetAwaiter().GetResult(), "cancelled after the timer");
                Check(oce != null && oce.CancellationToken == caller.Token, "the caller's own cancellation, after the timer");
                Check(attempts.Count == 1 && attempts[0].Outcome == Outcome.Timeout && p.Breaker.Snapshot().Failures == 1,
                    "the attempt counts as a timeout: " + string.Join(", ", attempts));
            }
        }

        sealed class NoResponse : HttpMessageHandler
        {
            protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken ct)
            {
                return Task.FromResult<HttpResponseMessage>(null);
            }
        }

        static void Cancellation()
        {
            // The real sleeper (Task.Delay) honours the token: cancelled during a 20 s wait, at once.
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var caller = new CancellationTokenSource())
            using (var waiting = new ManualResetEventSlim())
            {
                p.OnRetry = w => waiting.Set();
                var call = p.ExecuteAsync(ct => { throw new RetryLaterException(TimeSpan.FromSeconds(20)); }, caller.Token);
                Check(waiting.Wait(Watchdog) && !call.IsCompleted, "waiting out the Retry-After");
                caller.Cancel();
                var oce = Throws<OperationCanceledException>(() => call.GetAwaiter().GetResult(), "cancelled during Task.Delay");
                Check(oce != null && oce.CancellationToken == caller.Token, "the caller's own cancellation");
            }
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var caller = new CancellationTokenSource())
            using (var waiting = new ManualResetEventSlim())
            {
                p.OnRetry = w => waiting.Set();
                var call = Task.Run(() => p.Execute(ct => { throw new RetryLaterException(TimeSpan.FromSeconds(20)); }, caller.Token));
                Check(waiting.Wait(Watchdog), "sync: waiting out the Retry-After");
                caller.Cancel();
                var oce = Throws<OperationCanceledException>(() => call.GetAwaiter().GetResult(), "sync: cancelled during the wait");
                Check(oce != null && oce.CancellationToken == caller.Token, "sync: the caller's own cancellation");
            }
            // A caller cancelled before the call reaches nothing: an open breaker's probe stays.
            var o = new PolicyOptions { Breaker = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1) } };
            using (var clock = new ManualClock())
            using (var p = new Policy(o, clock))
            using (var cancelled = new CancellationTokenSource())
            {
                p.Breaker.Record(p.Breaker.Allow(), Outcome.Failure);
                clock.Advance(TimeSpan.FromSeconds(30));
                cancelled.Cancel();
                int calls = 0;
                Throws<OperationCanceledException>(() => Await(p.ExecuteAsync(ct => Task.FromResult(++calls), cancelled.Token)), "cancelled before");
                Throws<OperationCanceledException>(() => p.Execute(ct => ++calls, cancelled.Token), "sync: cancelled before");
                Check(calls == 0 && p.Breaker.Snapshot().Probes == 0, "no attempt, no probe spent");
                Check(Await(p.ExecuteAsync(ct => Task.FromResult(++calls))) == 1 && p.Breaker.Snapshot().Probes == 1, "the probe went to the next caller");
            }
        }

        static void BreakerExecuteAsync()
        {
            using (var clock = new ManualClock())
            using (var b = new Breaker(new BreakerOptions(), clock))
            using (var caller = new CancellationTokenSource())
            {
                var bug = new NullReferenceException();
                Check(ReferenceEquals(Throws<NullReferenceException>(() => b.ExecuteAsync(ct => { throw bug; }).GetAwaiter().GetResult(), "bug"), bug)
                    && b.Snapshot().Failures == 0, "Breaker.ExecuteAsync: a programming error is rethrown and moves nothing");
                var refused = new SocketException();
                Check(ReferenceEquals(Throws<SocketException>(() => b.ExecuteAsync(ct => { throw refused; }).GetAwaiter().GetResult(), "failure"), refused)
                    && b.Snapshot().Failures == 1, "Breaker.ExecuteAsync: a transport error is a failure, rethrown");
                Throws<OperationCanceledException>(() => b.ExecuteAsync(ct =>
                {
                    caller.Cancel();
                    ct.ThrowIfCancellationRequested();
                    return Task.FromResult(0);
                }, caller.Token).GetAwaiter().GetResult(), "cancelled");
                Check(b.Snapshot().Failures == 1, "Breaker.ExecuteAsync: the caller's cancellation moves nothing");
            }
        }
    }
}
