// API tests of the C# binding (no test framework on Mono: a console program). Time moves only
// through a ManualClock; ExecuteAsync's sleeper advances it. Prints `N passed, N failed`.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    static class ApiTests
    {
        static int passed, failed;

        static void Check(bool cond, string what)
        {
            if (cond) passed++;
            else
            {
                failed++;
                Console.WriteLine("FAIL " + what);
            }
        }

        static T Throws<T>(Action a, string what) where T : Exception
        {
            try
            {
                a();
            }
            catch (T e)
            {
                passed++;
                return e;
            }
            catch (Exception e)
            {
                failed++;
                Console.WriteLine("FAIL {0}: expected {1}, got {2}", what, typeof(T).Name, e);
                return null;
            }
            failed++;
            Console.WriteLine("FAIL {0}: expected {1}, nothing thrown", what, typeof(T).Name);
            return null;
        }

        static void ConfigErrors()
        {
            var o = new BreakerOptions();
            o.OpenInterval.Multiplier = double.NaN;
            var e = Throws<ArgumentException>(() => new Breaker(o).Dispose(), "NaN multiplier");
            Check(e != null && e.ParamName == "breaker.open_interval.multiplier", "field of NaN multiplier");
            o = new BreakerOptions();
            o.OpenInterval.Initial = TimeSpan.FromSeconds(-1);
            e = Throws<ArgumentException>(() => new Breaker(o).Dispose(), "negative interval");
            Check(e != null && e.ParamName == "breaker.open_interval.initial", "field of negative interval");
            o = new BreakerOptions { Trip = TripPolicy.FailureRate(1.5, 10, TimeSpan.FromMinutes(1)) };
            e = Throws<ArgumentException>(() => new Breaker(o).Dispose(), "rate > 1");
            Check(e != null && e.ParamName == "breaker.trip.threshold", "field of rate");
            var b = new BudgetOptions();
            b.MaxRateLimitDuration = b.RetryAfterCap;
            e = Throws<ArgumentException>(() => new RetryBudget(b).Dispose(), "budget without room for two waits");
            Check(e != null && e.ParamName == "budget.max_rate_limit_duration", "field of budget");
            e = Throws<ArgumentException>(() => HoldoffConfig.Parse("{\"breaker\": {\"recoverys\": 3}}").Dispose(), "unknown key");
            Check(e != null && e.ParamName == "config", "field of unknown key");
            using (var br = new Breaker(new BreakerOptions()))
            {
                var p = br.Allow();
                Throws<ArgumentOutOfRangeException>(() => br.Record(p, Outcome.RetryLater(TimeSpan.FromSeconds(-1))), "negative delay");
                Check(br.Record(p, Outcome.Success) == Effect.Counted, "the refused record left the permit usable");
            }
        }

        static void BreakerBasics()
        {
            using (var clock = new ManualClock())
            using (var b = new Breaker(new BreakerOptions(), clock))
            using (var other = new Breaker(new BreakerOptions(), clock))
            {
                for (int i = 0; i < 5; i++) b.Record(b.Allow(), Outcome.Failure);
                var open = Throws<BreakerOpenException>(() => b.Allow(), "open breaker refuses");
                Check(open != null && open.RetryAfter == TimeSpan.FromSeconds(30) && open.State == State.Open, "refusal retry-after");
                Check(open.Message == "holdoff: breaker open: retry after 00:00:30", "refusal message: " + open.Message);
                clock.Advance(TimeSpan.FromSeconds(30));
                var p = b.Allow();
                Check(p.IsProbe && p.Episode == 1, "probe admitted at exactly 30 s");
                var pe = Throws<PermitException>(() => other.Record(p, Outcome.Success), "foreign permit");
                Check(pe != null && pe.Name == "foreign_permit", "foreign name");
                Check(b.Record(p, Outcome.Success) == Effect.Counted, "own breaker records it");
                pe = Throws<PermitException>(() => b.Record(p, Outcome.Success), "second record");
                Check(pe != null && pe.Name == "permit_already_recorded", "already recorded name");
                var s = b.Snapshot();
                Check(s.State == State.HalfOpen && s.Recoveries == 1 && s.Opens == 1, "snapshot");
                var ev = b.DrainEvents();
                Check(ev.Count == 2 && ev[0].Reason == Reason.Tripped && ev[0].OpenFor == TimeSpan.FromSeconds(30), "events");
                var ce = Throws<HoldoffException>(() => clock.Set(TimeSpan.FromSeconds(1)), "clock backwards");
                Check(ce != null && ce.Name == "clock_backwards", "clock backwards name");
                b.ForceOpen();
                open = Throws<BreakerOpenException>(() => b.Allow(), "forced open");
                Check(open != null && !open.RetryAfter.HasValue && open.State == State.ForcedOpen, "forced open has no retry time");
                Check(open.Message == "holdoff: breaker forced_open: calls refused until reset", "forced open message: " + open.Message);
            }
            var d = new Breaker(new BreakerOptions());
            d.Dispose();
            Throws<ObjectDisposedException>(() => d.Allow(), "use after Dispose");
        }

        static Policy TestPolicy(ManualClock clock, List<TimeSpan> slept)
        {
            var p = new Policy(new PolicyOptions(), clock);
            p.Sleeper = (d, ct) =>
            {
                ct.ThrowIfCancellationRequested();
                slept.Add(d);
                clock.Advance(d);
                return Task.FromResult(0);
            };
            return p;
        }

        static void PolicyExecute()
        {
            using (var clock = new ManualClock())
            {
                var slept = new List<TimeSpan>();
                using (var p = TestPolicy(clock, slept))
                {
                    int attempts = 0;
                    p.ExecuteAsync(async ct =>
                    {
                        await Task.Yield();
                        attempts++;
                        if (attempts == 1) throw new InvalidOperationException("503");
                        if (attempts == 2) throw new OutcomeException(Outcome.RetryLater(TimeSpan.FromSeconds(2)), null);
                    }).Wait();
                    Check(attempts == 3, "three attempts");
                    Check(slept.Count == 2 && slept[0] == TimeSpan.FromMilliseconds(500) && slept[1] == TimeSpan.FromSeconds(2),
                        "backoff then Retry-After: " + string.Join(",", slept));
                    // Half-open now (3 probe answers close it); a first attempt does not wait.
                    var agg = Throws<AggregateException>(() => p.ExecuteAsync(ct => Task.FromResult(0)).Wait(), "half-open policy");
                    var gu = agg != null ? agg.InnerException as GiveUpException : null;
                    Check(gu != null && gu.Reason == GiveUpReason.BreakerOpen && gu.InnerException is BreakerOpenException,
                        "gives up with a BreakerOpenException inside");
                    p.Breaker.Reset();
                    agg = Throws<AggregateException>(() => p.ExecuteAsync(ct =>
                    {
                        throw new OutcomeException(Outcome.Answer, new KeyNotFoundException("404"));
                    }).Wait(), "answer");
                    gu = agg != null ? agg.InnerException as GiveUpException : null;
                    Check(gu != null && gu.Reason == GiveUpReason.NotRetryable && gu.Attempts == 1, "answers are not retried");
                }
                using (var p = TestPolicy(clock, slept))
                using (var cts = new CancellationTokenSource())
                {
                    slept.Clear();
                    var agg = Throws<AggregateException>(() => p.ExecuteAsync(ct =>
                    {
                        cts.Cancel();
                        throw new InvalidOperationException("503");
                    }, cts.Token).Wait(), "cancelled");
                    var gu = agg != null ? agg.InnerException as GiveUpException : null;
                    Check(gu != null && gu.Reason == GiveUpReason.Cancelled && slept.Count == 0, "cancellation gives up at once");
                }
            }
            // The real sleeper (Task.Delay) is cancelled by the token.
            using (var p = new Policy(new PolicyOptions()))
            using (var cts = new CancellationTokenSource())
            {
                var task = p.ExecuteAsync(ct => { throw new OutcomeException(Outcome.RetryLater(TimeSpan.FromHours(1)), null); }, cts.Token);
                cts.Cancel();
                var agg = Throws<AggregateException>(() => task.Wait(), "cancelled during Task.Delay");
                var gu = agg != null ? agg.InnerException as GiveUpException : null;
                Check(gu != null && gu.Reason == GiveUpReason.Cancelled, "Task.Delay cancelled");
            }
        }

        static void HttpAndQuota()
        {
            var now = new DateTimeOffset(1994, 11, 6, 8, 48, 37, TimeSpan.Zero);
            var h = RetryAfterHeader.Parse("Sun, 06 Nov 1994 08:49:37 GMT", now);
            Check(h.Unusable == Unusable.Usable && h.Delay == TimeSpan.FromMinutes(1), "HTTP-date");
            Check(RetryAfterHeader.Parse("-5", now).Unusable == Unusable.Signed, "signed");
            var hs = new List<KeyValuePair<string, string>>
            {
                new KeyValuePair<string, string>("retry-after", "120"), new KeyValuePair<string, string>("Retry-After", "60"),
            };
            Check(RetryAfterHeader.FromHeaders(hs, now).Unusable == Unusable.Conflicting, "conflicting");
            using (var c = new Classifier(new ClassifierOptions { FailureStatuses = new[] { 403 } }))
            {
                Check(c.Classify(403, null, now).Outcome.Kind == OutcomeKind.Failure, "403 override");
                var e = Throws<HoldoffInputException>(() => c.Classify(700, null, now), "status 700");
                Check(e is ArgumentException && e.Name == "invalid_input" && e.ParamName == e.Field, "invalid_input is an ArgumentException");
                Throws<ArgumentException>(() => c.Classify(99, null, now), "status 99");
            }
            using (var q = new RetryQuota(new QuotaOptions { Capacity = 12 }))
            {
                var l = q.Acquire(false);
                Check(l.Acquired && l.Cost == 5 && q.Available == 7 && !q.Acquire(true).Acquired, "quota acquire");
                q.OnSuccess(l);
                Check(q.Available == 12, "quota refund");
                Throws<PermitException>(() => q.OnSuccess(l), "second refund");
            }
            using (var g = new BreakerGroup(new BreakerOptions()))
                Check(g["a"] == g["a"] && g["a"] != g["b"] && g.Count == 2, "group");
        }

        static void Threads()
        {
            var o = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1000000) };
            using (var b = new Breaker(o))
            {
                var shared = b.Allow();
                int already = 0, counted = 0;
                var threads = new Thread[8];
                for (int t = 0; t < threads.Length; t++)
                {
                    int seed = t;
                    threads[t] = new Thread(() =>
                    {
                        for (int i = 0; i < 5000; i++)
                        {
                            b.Record(b.Allow(), (i + seed) % 7 == 0 ? Outcome.Failure : Outcome.Success);
                            Interlocked.Increment(ref counted);
                        }
                        try
                        {
                            b.Record(shared, Outcome.Success);
                        }
                        catch (PermitException)
                        {
                            Interlocked.Increment(ref already);
                        }
                    });
                    threads[t].Start();
                }
                foreach (var t in threads) t.Join();
                Check(counted == 40000 && already == 7, "threads share one breaker; one record of the shared permit wins");
            }
        }

        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        static void Drop(int n)
        {
            for (int i = 0; i < n; i++) new Breaker(new BreakerOptions());
        }

        static void Finalizers()
        {
            ulong before = Library.LiveHandles;
            Drop(10);
            Check(Library.LiveHandles >= before + 10, "10 live breakers");
            // Mono scans stacks conservatively: a few collections may be needed.
            for (int i = 0; i < 20 && Library.LiveHandles > before; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Check(Library.LiveHandles == before, "the SafeHandle finalizers released them: " + (Library.LiveHandles - before) + " left");
        }

        static void Bench()
        {
            using (var b = new Breaker(new BreakerOptions()))
            {
                const int n = 2000000;
                double best = double.MaxValue;
                for (int run = 0; run < 5; run++)
                {
                    var sw = Stopwatch.StartNew();
                    for (int i = 0; i < n; i++) b.Record(b.Allow(), Outcome.Success);
                    best = Math.Min(best, sw.Elapsed.TotalMilliseconds * 1e6 / n);
                }
                Console.WriteLine("C# allow+record (closed, success), 1 thread: {0:F1} ns/op", best);
                best = double.MaxValue;
                for (int run = 0; run < 5; run++)
                {
                    var sw = Stopwatch.StartNew();
                    for (int i = 0; i < n; i++) Library.LinkedAbiVersion.GetHashCode();
                    best = Math.Min(best, sw.Elapsed.TotalMilliseconds * 1e6 / n);
                }
                Console.WriteLine("C# one empty P/Invoke call (the crossing alone):  {0:F1} ns/op", best);
            }
        }

        static void UnitBounds()
        {
            using (var clock = new ManualClock())
            {
                // 2^64 ns is about 584.5 years: beyond it the nanosecond count must not wrap.
                var e = Throws<ArgumentOutOfRangeException>(() => clock.Advance(TimeSpan.FromDays(365.25 * 600)), "600 years");
                Check(e != null && e.ParamName == "d", "ParamName of an overflowing span");
                Check(clock.Now == TimeSpan.Zero, "clock not moved by a refused span");
                e = Throws<ArgumentOutOfRangeException>(() => clock.Set(TimeSpan.MaxValue), "TimeSpan.MaxValue");
                Check(e != null && e.ParamName == "t", "ParamName of TimeSpan.MaxValue");
                clock.Advance(TimeSpan.FromDays(365.25 * 500));
                Check(clock.Now == TimeSpan.FromDays(365.25 * 500), "500 years fit");
            }
            var far = new DateTimeOffset(9000, 1, 1, 0, 0, 0, TimeSpan.Zero);
            var e2 = Throws<ArgumentOutOfRangeException>(() => new ManualClock(far).Dispose(), "wall origin in 9000");
            Check(e2 != null && e2.ParamName == "wallOrigin", "ParamName of a far wall origin");
            e2 = Throws<ArgumentOutOfRangeException>(() => new ManualClock(new DateTimeOffset(1969, 1, 1, 0, 0, 0, TimeSpan.Zero)).Dispose(), "wall origin in 1969");
            Check(e2 != null && e2.ParamName == "wallOrigin", "ParamName of a pre-1970 wall origin");
            e2 = Throws<ArgumentOutOfRangeException>(() => RetryAfterHeader.Parse("5", far), "now in 9000");
            Check(e2 != null && e2.ParamName == "now", "ParamName of a far now");
        }

        static void LongDelay()
        {
            // Task.Delay refuses more than Int32.MaxValue ms (~24.8 days); the default sleeper
            // must accept a 30-day wait and still honour cancellation. No real time passes: the
            // wait is cancelled at once.
            using (var cts = new CancellationTokenSource())
            {
                Task t = null;
                try
                {
                    t = Policy.Delay(TimeSpan.FromDays(30), cts.Token);
                }
                catch (Exception e)
                {
                    Check(false, "30-day delay threw " + e.GetType().Name);
                }
                Check(t != null && !t.IsFaulted, "30-day delay accepted: " + (t != null && t.Exception != null ? t.Exception.InnerException.GetType().Name : ""));
                cts.Cancel();
                bool cancelled = false;
                try
                {
                    if (t != null) t.Wait();
                }
                catch (AggregateException e)
                {
                    cancelled = e.InnerException is OperationCanceledException;
                }
                Check(cancelled, "30-day delay cancelled by the token");
            }
            Throws<ArgumentOutOfRangeException>(() => Policy.Delay(TimeSpan.FromSeconds(-1), CancellationToken.None), "negative delay");
        }

        static int Main(string[] args)
        {
            if (args.Length == 1 && args[0] == "bench")
            {
                Bench();
                return 0;
            }
            ConfigErrors();
            BreakerBasics();
            PolicyExecute();
            HttpAndQuota();
            Threads();
            UnitBounds();
            LongDelay();
            Finalizers();
            GC.Collect();
            GC.WaitForPendingFinalizers();
            Check(Library.LiveHandles == 0, "no handle left alive: " + Library.LiveHandles);
            Console.WriteLine("{0} passed, {1} failed", passed, failed);
            return failed > 0 ? 1 : 0;
        }
    }
}
