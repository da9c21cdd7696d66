// API tests of the C# binding (no test framework on Mono: a console program). Time moves only
// through a ManualClock; the retry helpers' sleeper moves it (TestTime.cs). The helpers' tests
// are in ExecuteTests.cs, HandlerTests.cs and DeadlineStorm.cs. Prints `N passed, N failed`.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    static partial class ApiTests
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

        static void HttpAndQuota()
        {
            var now = new DateTimeOffset(1994, 11, 6, 8, 48, 37, TimeSpan.Zero);
            var h = RetryAfter.Parse("Sun, 06 Nov 1994 08:49:37 GMT", now);
            Check(h.Unusable == Unusable.Usable && h.Delay == TimeSpan.FromMinutes(1), "HTTP-date");
            Check(RetryAfter.Parse("-5", now).Unusable == Unusable.Signed, "signed");
            var hs = new List<KeyValuePair<string, string>>
            {
                new KeyValuePair<string, string>("retry-after", "120"), new KeyValuePair<string, string>("Retry-After", "60"),
            };
            Check(RetryAfter.HintFromHeaders(hs, now).Unusable == Unusable.Conflicting, "conflicting");
            using (var c = new Classifier(new ClassifierOptions { FailureStatuses = new[] { 403 } }))
            {
                Check(c.Classify(403, NoHeaders, now).Outcome.Kind == OutcomeKind.Failure, "403 override");
                // 0..999 are statuses; outside 100..599 a broken upstream, a failure whatever it says.
                foreach (long broken in new long[] { 0, 99, 600, 700, 999 })
                {
                    var cl = c.Classify(broken, Header("retry-after", "5"), now);
                    Check(cl.Outcome.Kind == OutcomeKind.Failure, "status " + broken + " is a failure: " + cl.Outcome);
                }
                // Anything else reaches the core's check, whatever its width.
                foreach (long notStatus in new long[] { -1, 1000, 70000, (long)int.MaxValue + 1, long.MinValue })
                {
                    var e = Throws<InvalidInputException>(() => c.Classify(notStatus, NoHeaders, now), "status " + notStatus);
                    Check(e is ArgumentException && e.Name == "invalid_input" && e.ParamName == "status" && e.Field == "status",
                        "invalid_input naming status for " + notStatus);
                }
                var answer = c.Classify(404, Header("x-should-retry", "true"), now);
                Check(answer.Outcome.Kind == OutcomeKind.Failure && answer.ShouldRetry == true, "x-should-retry: true makes a 404 a failure");
                var no = c.Classify(500, Header("x-should-retry", "false"), now);
                Check(no.Outcome.Kind == OutcomeKind.Answer && no.ShouldRetry == false, "x-should-retry: false makes a 500 an answer");
                var listed = c.Classify(403, Header("x-should-retry", "false"), now);
                Check(listed.Outcome.Kind == OutcomeKind.Failure && listed.ShouldRetry == false, "x-should-retry never overrides the options' lists");
                var plain = c.Classify(404, NoHeaders, now);
                Check(plain.Outcome.Kind == OutcomeKind.Answer && plain.ShouldRetry == null, "no x-should-retry: null");
                Check(c.Classify(404, Header("x-should-retry", "maybe"), now).ShouldRetry == null, "another value is ignored");
            }
            var ms = RetryAfter.HintFromHeaders(Header("retry-after-ms", "1500.2"), now);
            Check(ms.Source == HintSource.RetryAfterMs && ms.Delay == TimeSpan.FromMilliseconds(1501), "retry-after-ms rounds up: " + ms.Delay);
            var both = RetryAfter.HintFromHeaders(new List<KeyValuePair<string, string>>
            {
                new KeyValuePair<string, string>("Retry-After", "60"), new KeyValuePair<string, string>("x-ms-retry-after-ms", "250"),
            }, now);
            Check(both.Source == HintSource.XMsRetryAfterMs && both.Delay == TimeSpan.FromMilliseconds(250), "x-ms-retry-after-ms before Retry-After");
            var rl = RetryAfter.HintFromHeaders(Header("RateLimit", "\"default\";r=0;t=7"), now);
            Check(rl.Source == HintSource.RateLimit && rl.Delay == TimeSpan.FromSeconds(7), "RateLimit's t");
            Check(Names.Of(HintSource.RetryAfterMs) == "retry_after_ms" && Names.Of(HintSource.XMsRetryAfterMs) == "x_ms_retry_after_ms"
                && Names.Of(HintSource.RateLimit) == "ratelimit" && Names.Of(HintSource.None) == "none", "hint source names from the core");
            Check(Names.Of(GiveUpReason.RetryAfterAboveCap) == "retry_after_above_cap" && Names.Of(GiveUpReason.TotalTimeout) == "total_timeout"
                && Names.Of(GiveUpReason.Cancelled) == "cancelled", "give-up reason names from the core");
            using (var q = new RetryQuota(new QuotaOptions { Capacity = 12 }))
            using (var other = new RetryQuota(new QuotaOptions { Capacity = 12 }))
            {
                var l = q.Acquire(false);
                Check(l.Acquired && l.Cost == 5 && q.Available == 7 && !q.Acquire(true).Acquired, "quota acquire");
                other.Acquire(false);
                var pe = Throws<PermitException>(() => other.OnSuccess(l), "lease given to another quota");
                Check(pe != null && pe.Name == "foreign_permit" && pe.Field == "lease", "foreign lease: " + (pe != null ? pe.Name + "/" + pe.Field : ""));
                Check(other.Available == 7 && q.Available == 7, "a foreign lease moves neither bucket");
                q.OnSuccess(l);
                Check(q.Available == 12, "the foreign lease stayed usable on its own quota");
                pe = Throws<PermitException>(() => q.OnSuccess(l), "second refund");
                Check(pe != null && pe.Name == "permit_already_recorded" && pe.Field == "lease", "lease given back twice");
                q.Acquire(false);
                Check(q.Available == 7, "the refused second refund added nothing");
                var ie = Throws<InvalidInputException>(() => q.OnSuccess(q.Acquire(true)), "lease never acquired");
                Check(ie != null && ie.ParamName == "lease" && q.Available == 7, "an unacquired lease refunds nothing");
            }
        }

        static readonly List<KeyValuePair<string, string>> NoHeaders = new List<KeyValuePair<string, string>>();

        static List<KeyValuePair<string, string>> Header(string name, string value)
        {
            return new List<KeyValuePair<string, string>> { new KeyValuePair<string, string>(name, value) };
        }

        static void Groups()
        {
            using (var clock = new ManualClock())
            {
                using (var g = new BreakerGroup(new BreakerOptions(), clock))
                {
                    Check(g.MaxKeys == 10000, "the core's default bound: " + g.MaxKeys);
                    using (var a1 = g.Get("a"))
                    using (var a2 = g.Get("a"))
                    {
                        Check(!ReferenceEquals(a1, a2), "each Get is a new object");
                        a1.ForceOpen();
                        Check(a2.Snapshot().State == State.ForcedOpen && g.Count == 1, "both objects are the group's one breaker for a");
                    }
                    using (var a3 = g.Get("a"))
                        Check(a3.Snapshot().State == State.ForcedOpen, "disposing the objects left the group's breaker");
                }
                var o = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1) };
                using (var g = new BreakerGroup(o, clock, 2))
                {
                    Check(g.MaxKeys == 2, "MaxKeys from the constructor");
                    using (var a = g.Get("a")) a.Record(a.Allow(), Outcome.Success);
                    g.Get("b").Dispose();
                    using (var a = g.Get("a")) { }
                    g.Get("c").Dispose();
                    var s = g.Snapshot();
                    Check(s.Keys == 2 && s.MaxKeys == 2 && s.Evictions == 1 && s.Overflows == 0, "c evicted b, the least recently used");
                    var keys = g.Keys();
                    Check(keys.Count == 2 && keys[0] == "a" && keys[1] == "c", "kept keys, sorted: " + string.Join(",", keys));
                    using (var a = g.Get("a")) a.Record(a.Allow(), Outcome.Failure);
                    using (var c = g.Get("c")) c.Record(c.Allow(), Outcome.Failure);
                    Breaker d = g.Get("d");
                    using (d)
                    {
                        Check(d.Snapshot().State == State.Closed, "an overflow breaker works");
                        s = g.Snapshot();
                        Check(s.Keys == 2 && s.Evictions == 1 && s.Overflows == 1, "nothing idle: d overflows");
                    }
                    using (var a = g.Get("a"))
                        Check(a.Snapshot().State == State.Open, "the open breaker was kept");
                    keys = g.Keys();
                    Check(keys.Count == 2 && keys[0] == "a" && keys[1] == "c", "Keys marks nothing and d is not kept");
                }
                foreach (int bad in new[] { 0, -1, 100000001 })
                {
                    var e = Throws<InvalidConfigException>(() => new BreakerGroup(new BreakerOptions(), clock, bad).Dispose(), "maxKeys " + bad);
                    Check(e != null && e.ParamName == "group.max_keys", "maxKeys " + bad + " names group.max_keys");
                }
                using (var cfg = HoldoffConfig.Parse("{\"breaker\":{},\"group\":{\"max_keys\":3}}"))
                using (var g = cfg.NewBreakerGroup(clock))
                    Check(cfg.Parts == (ConfigParts.Breaker | ConfigParts.Group) && g.MaxKeys == 3, "group.max_keys in the neutral configuration");
                Throws<ArgumentNullException>(() => { using (var g = new BreakerGroup(new BreakerOptions(), clock)) g.Get(null); }, "null key");
                var ue = Throws<ArgumentException>(() => { using (var g = new BreakerGroup(new BreakerOptions(), clock)) g.Get("\ud800"); }, "lone surrogate");
                Check(ue != null && ue.ParamName == "key", "a lone surrogate names key");
            }
        }

        static void BudgetAboveCap()
        {
            using (var clock = new ManualClock())
            {
                Check(!new BudgetOptions().GiveUpAboveCap, "GiveUpAboveCap defaults to false");
                using (var waits = new RetryBudget(new BudgetOptions(), clock))
                using (var s = new RetryState())
                {
                    var d = waits.Decide(s, Outcome.RetryLater(TimeSpan.FromSeconds(400)));
                    Check(d.Kind == DecisionKind.Retry && d.Delay == TimeSpan.FromSeconds(300) && d.Capped && d.ServerDelay == TimeSpan.FromSeconds(400),
                        "the default waits the cap");
                }
                using (var gives = new RetryBudget(new BudgetOptions { GiveUpAboveCap = true }, clock))
                using (var s = new RetryState())
                {
                    var d = gives.Decide(s, Outcome.RetryLater(TimeSpan.FromSeconds(400)));
                    Check(d.Kind == DecisionKind.GiveUp && d.Reason == GiveUpReason.RetryAfterAboveCap && d.ServerDelay == TimeSpan.FromSeconds(400),
                        "GiveUpAboveCap gives up with the server's delay");
                    d = gives.Decide(s, Outcome.RetryLater(TimeSpan.FromSeconds(300)));
                    Check(d.Kind == DecisionKind.Retry && d.Delay == TimeSpan.FromSeconds(300) && !d.Capped, "a delay at the cap is waited");
                }
            }
        }

        static void PolicyStatuses()
        {
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var call = new PolicyCall())
            {
                var b = p.BeforeAttempt(call);
                Classification cl = null;
                var e = Throws<InvalidInputException>(() => p.AfterResponse(call, b.Permit, 70000, NoHeaders, out cl), "policy status 70000");
                Check(e != null && e.ParamName == "status", "the policy refuses 70000 naming status");
                var pe = Throws<PermitException>(() => p.Breaker.Record(b.Permit, Outcome.Success), "the refused status spent the permit");
                Check(pe != null && pe.Name == "permit_already_recorded", "recorded as cancelled: " + (pe != null ? pe.Name : ""));
                b = p.BeforeAttempt(call);
                var d = p.AfterResponse(call, b.Permit, 999, NoHeaders, out cl);
                Check(cl.Outcome.Kind == OutcomeKind.Failure && d.Kind == DecisionKind.Retry && p.Breaker.Snapshot().Failures == 1,
                    "999 is a failure for breaker and budget");
            }
        }

        static void ProbeRules()
        {
            var o = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1) };
            using (var clock = new ManualClock())
            using (var b = new Breaker(o, clock))
            {
                b.Record(b.Allow(), Outcome.Failure);
                clock.Set(TimeSpan.FromSeconds(30));
                var probe = b.Allow();
                Check(b.Record(probe, Outcome.Cancelled) == Effect.Ignored, "a cancellation moves no recovery");
                var s = b.Snapshot();
                Check(s.ProbesInFlight == 0, "a cancelled probe frees its slot");
                var refused = Throws<BreakerOpenException>(() => b.Allow(), "a cancelled probe's window stays spent");
                Check(refused != null && refused.RetryAfter == TimeSpan.FromSeconds(30), "next probe a full interval after the cancelled one's admission");
                clock.Set(TimeSpan.FromSeconds(60));
                b.Record(b.Allow(), Outcome.Failure);
                // Re-opened with the next backoff step (60 s); once a probe is answered, the ramp
                // runs at the first step (30 s) after that probe's admission.
                clock.Set(TimeSpan.FromSeconds(120));
                var first = b.Allow();
                Check(first.IsProbe, "probe after the grown backoff");
                Check(b.Record(first, Outcome.Success) == Effect.Counted, "ramp probe answered");
                s = b.Snapshot();
                Check(s.State == State.HalfOpen && s.Recoveries == 1 && s.Interval == TimeSpan.FromSeconds(30) && s.RetryAfter == TimeSpan.FromSeconds(30),
                    "the ramp's interval is the first step: " + s.Interval + " / " + s.RetryAfter);
                clock.Set(TimeSpan.FromSeconds(149));
                Throws<BreakerOpenException>(() => b.Allow(), "not before the first step");
                clock.Set(TimeSpan.FromSeconds(150));
                Check(b.Allow().IsProbe, "the next ramp probe at the first step, not the grown 60 s");
            }
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
            // Earlier tests' garbage finalized during this one would move the count too.
            GC.Collect();
            GC.WaitForPendingFinalizers();
            ulong before = Library.LiveHandles;
            Drop(10);
            Check(Library.LiveHandles >= before + 10, "10 live breakers");
            // Mono scans stacks conservatively: a few collections may be needed.
            for (int i = 0; i < 20 && Library.LiveHandles > before; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Check(Library.LiveHandles == before, "the finalizers released them: " + (Library.LiveHandles - before) + " left");
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
            e2 = Throws<ArgumentOutOfRangeException>(() => RetryAfter.Parse("5", far), "now in 9000");
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
            ConfigMessages();
            NullArguments();
            BreakerBasics();
            ExecuteHelpers();
            HandlerHelpers();
            DeadlineStorm();
            HttpAndQuota();
            Groups();
            Fleets();
            MetricsModel();
            BudgetAboveCap();
            PolicyStatuses();
            ProbeRules();
            Threads();
            FastPath();
            Refusals();
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
