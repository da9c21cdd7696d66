// API tests of refusals decided in place (part of ApiTests): a breaker made without a clock reads
// its refusal block and Stopwatch's clock mapped onto the library's, on the real system clock.
// Each check compares with what the library says for the same breaker: the state, the episode,
// the retry time, the snapshot's and the metrics' refusal counts, and when a probe is due.
using System;
using System.Diagnostics;
using System.Linq;
using System.Threading.Tasks;
using System.Threading;
using Holdoff.Interop;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        static void Refusals()
        {
            RefusalsInPlace();
            RefusalsOnlyOnTheSharedClock();
            RefusalLetsTheProbeGo();
            RefusalsCountedByMetrics();
            RefusalsForcedOpen();
            RefusalsDisposed();
            RefusalsStress();
        }

        /// <summary>Open for 30 s on the system clock: the test ends well before a probe is due.</summary>
        static BreakerOptions OpenFor(int failures, TimeSpan interval)
        {
            return new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(failures),
                OpenInterval = new BackoffOptions { Initial = interval, Multiplier = 1, Max = interval },
            };
        }

        static void Trip(Breaker b, int failures)
        {
            for (int i = 0; i < failures; i++) b.Record(b.Allow(), Outcome.Failure);
        }

        /// <summary>The library's own answer for <paramref name="b"/> now (counted as a refusal too).</summary>
        static RefusalC LibraryRefusal(Breaker b)
        {
            PermitC p;
            RefusalC r;
            uint st = Native.holdoff_breaker_allow(b.Raw, out p, out r);
            Check(st == Status.BreakerOpen, "the library refuses too: status " + st);
            return r;
        }

        /// <summary>In-place refusals carry the library's state and episode, a retry time in
        /// (0, interval] within a few milliseconds of the library's, and are counted in the
        /// snapshot's refusals with the library's own.</summary>
        static void RefusalsInPlace()
        {
            var interval = TimeSpan.FromSeconds(30);
            using (var b = new Breaker(OpenFor(5, interval)))
            {
                Check(b.RefusesInPlace, "a breaker made without a clock refuses in place (Linux, Mono's Stopwatch)");
                Trip(b, 5);
                Check(b.Snapshot().State == State.Open && b.Snapshot().Refusals == 0, "tripped, nothing refused yet");
                const int n = 1000;
                for (int i = 0; i < n; i++)
                {
                    Permit p;
                    BreakerOpenException e;
                    long before = Stopwatch.GetTimestamp();
                    Check(!b.TryAllow(out p, out e) && p == null && e != null, "refused");
                    Check(e.State == State.Open && e.Episode == 1, "open, episode 1: " + e.State + " " + e.Episode);
                    Check(e.RetryAfter.HasValue && e.RetryAfter.Value > TimeSpan.Zero && e.RetryAfter.Value <= interval,
                        "retry after in (0, 30 s]: " + e.RetryAfter);
                    if (i % 100 == 0)
                    {
                        var lib = LibraryRefusal(b);
                        // The library read its clock after ours: our wait may be longer than its
                        // by at most the time between (never refused past its deadline), and
                        // shorter only by the mapping's slack.
                        double elapsedNs = (Stopwatch.GetTimestamp() - before) * (1e9 / Stopwatch.Frequency);
                        double longer = e.RetryAfter.Value.Ticks * 100.0 - lib.RetryAfterNs;
                        Check(lib.State == (uint)State.Open && lib.Episode == 1 && lib.HasRetryAfter == 1
                            && longer <= elapsedNs + 100 && longer > -5e6,
                            "the library's retry time agrees: ours - library's = " + longer + " ns, " + elapsedNs + " ns apart");
                    }
                }
                Permit q;
                for (int i = 0; i < n; i++) Check(!b.TryAllow(out q) && q == null, "refused, no refusal object");
                Throws<BreakerOpenException>(() => b.Allow(), "Allow throws when refused");
                bool ran = false;
                var t = b.ExecuteAsync(ct => { ran = true; return Task.CompletedTask; });
                Check(t.IsFaulted && t.Exception.InnerException is BreakerOpenException && !ran,
                    "ExecuteAsync refused: the task holds the refusal, fn not run");
                var s = b.Snapshot();
                Check(s.Refusals == 2 * n + n / 100 + 2, "every refusal counted once: " + s.Refusals + " of " + (2 * n + n / 100 + 2));
                Check(s.Opens == 1 && s.Probes == 0 && s.State == State.Open, "still open, no probe");
            }
        }

        /// <summary>Breakers on a clock of their own (manual or system) or in a group call the
        /// library for every refusal.</summary>
        static void RefusalsOnlyOnTheSharedClock()
        {
            using (var clock = new ManualClock())
            using (var b = new Breaker(OpenFor(1, TimeSpan.FromSeconds(30)), clock))
                Check(!b.RefusesInPlace, "a manual clock's breaker calls the library");
            using (var clock = new SystemClock())
            using (var b = new Breaker(OpenFor(1, TimeSpan.FromSeconds(30)), clock))
                Check(!b.RefusesInPlace, "a breaker on its own system clock calls the library");
            using (var g = new BreakerGroup(OpenFor(1, TimeSpan.FromSeconds(30))))
            using (var b = g.Get("k"))
                Check(!b.RefusesInPlace, "a group's breaker calls the library");
            using (var config = HoldoffConfig.Parse("{}"))
            using (var b = config.NewBreaker())
                Check(b.RefusesInPlace, "HoldoffConfig.NewBreaker() without a clock refuses in place");
        }

        /// <summary>A 1 ms open interval, then a sleep of 20 ms: the next call is the probe (the
        /// mapped clock never refuses past the deadline).</summary>
        static void RefusalLetsTheProbeGo()
        {
            for (int round = 0; round < 20; round++)
            {
                using (var b = new Breaker(OpenFor(1, TimeSpan.FromMilliseconds(1))))
                {
                    b.Record(b.Allow(), Outcome.Failure);
                    Thread.Sleep(20);
                    Permit p;
                    BreakerOpenException e;
                    bool admitted = b.TryAllow(out p, out e);
                    Check(admitted && p.IsProbe && p.Episode == 1, "after 20 ms the probe goes: " + (e == null ? "" : e.Message));
                    Check(!b.TryAllow(out p, out e) && e.State == State.HalfOpen, "the next call waits for the probe");
                    Check(b.Snapshot().Probes == 1 && b.Snapshot().Refusals == 1, "one probe, one refusal");
                }
            }
        }

        /// <summary>Once metrics are read every refusal goes to the library, which counts it in
        /// both: the metrics' refused calls are the snapshot's refusals since that read.</summary>
        static void RefusalsCountedByMetrics()
        {
            using (var b = new Breaker(OpenFor(5, TimeSpan.FromSeconds(30))))
            {
                Trip(b, 5);
                Permit p;
                for (int i = 0; i < 7; i++) b.TryAllow(out p);
                b.Metrics();
                for (int i = 0; i < 11; i++) Check(!b.TryAllow(out p), "refused while counting");
                double counted = b.Metrics().Single(m => m.Name == "holdoff.breaker.refused").Value;
                Check(counted == 11, "the metrics count the 11 refusals after the first read: " + counted);
                Check(b.Snapshot().Refusals == 18, "the snapshot counts all 18: " + b.Snapshot().Refusals);
            }
        }

        /// <summary>Forced open: no retry time, the operator's episode, counted; a reset admits.</summary>
        static void RefusalsForcedOpen()
        {
            using (var b = new Breaker(OpenFor(5, TimeSpan.FromSeconds(30))))
            {
                b.ForceOpen();
                BreakerOpenException e;
                Permit p;
                Check(!b.TryAllow(out p, out e) && e.State == State.ForcedOpen && !e.RetryAfter.HasValue && e.Episode == 1,
                    "forced open, no retry time, episode 1");
                var lib = LibraryRefusal(b);
                Check(lib.State == (uint)State.ForcedOpen && lib.HasRetryAfter == 0 && lib.Episode == 1, "as the library says");
                Check(b.Snapshot().Refusals == 2, "both counted");
                b.Reset();
                Check(b.TryAllow(out p) && !p.IsProbe && p.Episode == 0 && p.Raw.RawEpisode == 2, "reset: admitted while closed, in episode 2");
            }
        }

        /// <summary>After Dispose a refusal is ObjectDisposedException, as every call.</summary>
        static void RefusalsDisposed()
        {
            var b = new Breaker(OpenFor(1, TimeSpan.FromSeconds(30)));
            b.Record(b.Allow(), Outcome.Failure);
            b.Dispose();
            Permit p;
            Throws<ObjectDisposedException>(() => b.TryAllow(out p), "disposed");
        }

        /// <summary>Threads refuse in place and through the library on one breaker while another
        /// trips it and resets it: every refusal is counted exactly once, every admitted call's
        /// failure is counted (each trip happens when the library says), and no in-place refusal
        /// answers for a state the breaker was not in.</summary>
        static void RefusalsStress()
        {
            using (var b = new Breaker(OpenFor(3, TimeSpan.FromSeconds(30))))
            {
                const int threads = 4, perThread = 20000;
                long refusedInPlace = 0, refusedByLibrary = 0, admitted = 0, wrong = 0;
                long resets = 0;
                bool done = false;
                var workers = Enumerable.Range(0, threads).Select(t => new Thread(() =>
                {
                    for (int i = 0; i < perThread; i++)
                    {
                        if ((i & 7) == 7)
                        {
                            PermitC pc;
                            RefusalC rc;
                            uint st = Native.holdoff_breaker_allow(b.Raw, out pc, out rc);
                            if (st == Status.BreakerOpen) Interlocked.Increment(ref refusedByLibrary);
                            else
                            {
                                Interlocked.Increment(ref admitted);
                                b.Record(new Permit(pc), Outcome.Failure);
                            }
                            continue;
                        }
                        Permit p;
                        BreakerOpenException e;
                        if (b.TryAllow(out p, out e))
                        {
                            Interlocked.Increment(ref admitted);
                            b.Record(p, Outcome.Failure);
                        }
                        else
                        {
                            Interlocked.Increment(ref refusedInPlace);
                            bool ok = e.State == State.Open
                                ? e.RetryAfter.HasValue && e.RetryAfter.Value > TimeSpan.Zero && e.RetryAfter.Value <= TimeSpan.FromSeconds(30)
                                : e.State == State.ForcedOpen && !e.RetryAfter.HasValue;
                            if (!ok) Interlocked.Increment(ref wrong);
                        }
                    }
                })).ToList();
                var operatorThread = new Thread(() =>
                {
                    int k = 0;
                    while (!Volatile.Read(ref done))
                    {
                        if (k++ % 5 == 4) b.ForceOpen();
                        else b.Reset();
                        Interlocked.Increment(ref resets);
                        Thread.Sleep(1);
                    }
                });
                operatorThread.Start();
                workers.ForEach(w => w.Start());
                workers.ForEach(w => w.Join());
                Volatile.Write(ref done, true);
                operatorThread.Join();
                var s = b.Snapshot();
                Check(wrong == 0, "no in-place refusal with a state or retry time the breaker did not have: " + wrong);
                Check(refusedInPlace + refusedByLibrary + admitted == threads * perThread, "every call answered once");
                Check(s.Refusals == (ulong)(refusedInPlace + refusedByLibrary),
                    "the snapshot's refusals are exactly the refused calls: " + s.Refusals + " vs " + (refusedInPlace + refusedByLibrary));
                Check(refusedInPlace > 0 && admitted > 0, "both paths taken: " + refusedInPlace + " refused, " + admitted + " admitted");
                Check(s.Opens >= 1 && s.Opens <= (ulong)(admitted / 3), "trips only from counted failures: " + s.Opens + " of " + admitted + " failures");
            }
        }
    }
}
