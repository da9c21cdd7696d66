// API tests of the fast path (part of ApiTests): admission and clean successes decided on the
// breaker's fast-path word, checked against what the library does for the same calls, and a
// stress test where threads mix word-path successes with failures through the library on one
// breaker, with the books compared exactly against the snapshot and the metrics.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        static void FastPath()
        {
            FastPathLayout();
            FastPermitsMatchTheLibrary();
            FastPermitRules();
            FastSuccessNeedsACleanWord();
            FastPathAndDispose();
            FastPathGroup();
            FastPathWithoutWord();
            FastExecuteAsync();
            ExecuteAsyncRacingDispose();
            ProbeRacingDispose();
            PolicyExecuteRacingDispose();
            FastPathStress();
            FastPathStressCounted();
        }

        /// <summary>A consecutive-failure breaker on a frozen manual clock: once open it stays open
        /// until Reset.</summary>
        static BreakerOptions Consecutive(int n)
        {
            return new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(n),
                OpenInterval = new BackoffOptions { Initial = TimeSpan.FromSeconds(30), Multiplier = 1, Max = TimeSpan.FromSeconds(30) },
            };
        }

        static void FastPathLayout()
        {
            var t = typeof(FastPathC);
            Check(Marshal.SizeOf(t) == 24 && Offset(t, "Word") == 0 && Offset(t, "AdmitMask") == 8 && Offset(t, "Breaker") == 16
                && Offset(t, "Version") == 20, "holdoff_fast_path: 24 bytes, its offsets");
            using (var b = new Breaker(new BreakerOptions()))
            {
                FastPathC fp;
                Check(Native.holdoff_breaker_fast_path(b.Raw, out fp) == 0, "holdoff_breaker_fast_path");
                Check(fp.Version == Breaker.FastPathVersion && fp.AdmitMask == 0xF && fp.Word != IntPtr.Zero,
                    "version 1, admit mask 0xF: " + fp.Version + " " + fp.AdmitMask);
                Check(b.OnWord, "a breaker decides on its word");
                Check((ulong)Marshal.ReadInt64(fp.Word) == 0, "a new breaker's word: closed, episode 0, nothing pending");
                Check(fp.Word == b.Raw, "the handle is the word's address");
                Check(fp.Breaker != 0 && (uint)Marshal.ReadInt32(b.Raw, 28) == fp.Breaker,
                    "the id the permits carry is at offset 28 of the block: " + fp.Breaker);
            }
            BreakerSize();
        }

        /// <summary>A Breaker object is its native pointer and its gate (the word and the id are
        /// read in the native breaker): 32 managed bytes with Mono's 16-byte header.</summary>
        static void BreakerSize()
        {
            var fields = typeof(Breaker).GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);
            Check(fields.Length == 2 && fields.Any(f => f.Name == "raw" && f.FieldType == typeof(IntPtr))
                && fields.Any(f => f.Name == "gate" && f.FieldType == typeof(int)),
                "a Breaker's fields are raw and gate: " + string.Join(", ", fields.Select(f => f.FieldType.Name + " " + f.Name)));
            const int n = 10000;
            var keep = new Breaker[n];
            var options = new BreakerOptions();
            keep[0] = new Breaker(options);
            long before = GC.GetTotalMemory(true);
            for (int i = 1; i < n; i++) keep[i] = new Breaker(options);
            long after = GC.GetTotalMemory(true);
            double perObject = (after - before) / (double)(n - 1);
            foreach (var b in keep) b.Dispose();
            // The constructor's garbage is collected; what stays is the objects themselves (give or
            // take a few earlier objects a conservative stack scan kept alive: within 2 bytes each,
            // where a field more would be 8).
            Check(Math.Abs(perObject - 32) < 2, "32 managed bytes a breaker: " + perObject.ToString("F2"));
        }

        /// <summary>A permit admitted on the word is field for field the library's.</summary>
        static void FastPermitsMatchTheLibrary()
        {
            using (var b = new Breaker(Consecutive(2)))
            {
                b.Record(b.Allow(), Outcome.Failure);
                b.Record(b.Allow(), Outcome.Failure);
                b.Reset();
                b.Record(b.Allow(), Outcome.Failure);
                PermitC lib;
                RefusalC r;
                Check(Native.holdoff_breaker_allow(b.Raw, out lib, out r) == 0, "the library admits");
                var fast = b.Allow().Raw;
                Check(fast.Episode == lib.Episode && fast.Probe == lib.Probe && fast.Recorded == lib.Recorded && fast.Reserved == lib.Reserved
                    && fast.RawBreaker == lib.RawBreaker && fast.RawEpisode == lib.RawEpisode && fast.RawProbe == lib.RawProbe,
                    string.Format("same permit: episode {0}/{1}, raw episode {2}/{3}, breaker {4}/{5}", fast.Episode, lib.Episode,
                        fast.RawEpisode, lib.RawEpisode, fast.RawBreaker, lib.RawBreaker));
                Check(fast.RawEpisode == 2, "admitted in the episode after a trip and a reset: " + fast.RawEpisode);
            }
        }

        static void FastPermitRules()
        {
            using (var a = new Breaker(Consecutive(5)))
            using (var b = new Breaker(Consecutive(5)))
            {
                var p = a.Allow();
                Check(!p.IsProbe && p.Episode == 0, "a closed admission");
                Check(a.Record(p, Outcome.Success) == Effect.Counted, "a clean success is counted");
                Check(p.Raw.Recorded == 1, "the permit is marked recorded");
                var e = Throws<PermitException>(() => a.Record(p, Outcome.Success), "a second success");
                Check(e != null && e.Name == "permit_already_recorded", "second success: already recorded");
                e = Throws<PermitException>(() => a.Record(p, Outcome.Failure), "a failure after the success");
                Check(e != null && e.Name == "permit_already_recorded", "failure after success: already recorded");
                Check(a.Snapshot().Failures == 0, "the refused failure moved nothing");

                var q = a.Allow();
                a.Record(q, Outcome.Failure);
                e = Throws<PermitException>(() => a.Record(q, Outcome.Success), "a success after the failure");
                Check(e != null && e.Name == "permit_already_recorded", "success after failure: already recorded");
                Check(a.Snapshot().Failures == 1, "one failure pending");

                var f = a.Allow();
                e = Throws<PermitException>(() => b.Record(f, Outcome.Success), "a success on another breaker");
                Check(e != null && e.Name == "foreign_permit", "foreign: " + (e == null ? "" : e.Name));
                Check(f.Raw.Recorded == 0, "a foreign record leaves the permit unrecorded");
                Check(a.Record(f, Outcome.Success) == Effect.Counted && a.Snapshot().Failures == 0,
                    "the permit stays usable where it was issued (and its success clears the failure)");
            }
        }

        /// <summary>A group's breakers read their words too: two objects for one key are one
        /// native breaker (a permit of either is clean on the other), another key's permit is
        /// foreign, and an object keeps its breaker's word alive past its eviction, the other
        /// object's Dispose and the group's.</summary>
        static void FastPathGroup()
        {
            Breaker a, again, b, c;
            using (var g = new BreakerGroup(Consecutive(2), null, 2))
            {
                a = g.Get("a");
                again = g.Get("a");
                b = g.Get("b");
                Check(a.OnWord && again.OnWord && b.OnWord, "a group's breakers decide on their words");
                Check(a.Raw == again.Raw && a.Raw != b.Raw, "one native breaker a key");
                var p = a.Allow();
                Check(again.Record(p, Outcome.Success) == Effect.Counted && p.Raw.Recorded == 1,
                    "a permit of the key's breaker is clean on the key's other object");
                var e = Throws<PermitException>(() => b.Record(a.Allow(), Outcome.Failure), "a failure on another key");
                Check(e != null && e.Name == "foreign_permit", "another key's permit is foreign: " + (e == null ? "" : e.Name));
                Check(b.Snapshot().Failures == 0, "the foreign failure moved nothing");
                again.Dispose();
                c = g.Get("c"); // evicts "a" (two keys kept)
                Check(g.Count == 2, "the group keeps two keys: " + g.Count);
            }
            // The group is gone and "a" evicted: the object holds its breaker, word and all.
            var q = a.Allow();
            Check(!q.IsProbe && q.Episode == 0, "an evicted breaker still admits on its word");
            a.Record(q, Outcome.Failure);
            a.Record(a.Allow(), Outcome.Failure);
            var s = a.Snapshot();
            Check(s.State == State.Open && s.Opens == 1, "an evicted breaker's books: " + s.State + " " + s.Opens);
            Throws<BreakerOpenException>(() => a.Allow(), "an evicted breaker refuses once tripped");
            Throws<ObjectDisposedException>(() => again.Allow(), "the disposed object");
            a.Dispose();
            b.Dispose();
            c.Dispose();
        }

        /// <summary>A breaker without a usable word (what a library whose word is not at the
        /// handle gives: the gate without its word bit) never reads the native block: every
        /// call goes to the library, with the library's answers, and Dispose frees it at once.</summary>
        static void FastPathWithoutWord()
        {
            // Earlier tests' forgotten objects freed first, so that only this breaker moves the count.
            GC.Collect();
            GC.WaitForPendingFinalizers();
            ulong live = Library.LiveHandles;
            var b = new Breaker(Consecutive(2));
            var gate = typeof(Breaker).GetField("gate", BindingFlags.Instance | BindingFlags.NonPublic);
            gate.SetValue(b, 0);
            Check(!b.OnWord && !b.RefusesInPlace, "no word, no refusal in place");
            var p = b.Allow();
            Check(!p.IsProbe && p.Episode == 0 && p.Raw.RawBreaker != 0, "the library's permit");
            Check(b.Record(p, Outcome.Success) == Effect.Counted && p.Raw.Recorded == 1, "a success through the library");
            var e = Throws<PermitException>(() => b.Record(p, Outcome.Success), "a second success");
            Check(e != null && e.Name == "permit_already_recorded", "second success: already recorded");
            Permit q;
            Check(b.TryAllow(out q) && q != null, "TryAllow admits through the library");
            b.Record(q, Outcome.Failure);
            b.Record(b.Allow(), Outcome.Failure);
            Permit none;
            BreakerOpenException r;
            Check(!b.TryAllow(out none, out r) && none == null && r != null && r.State == State.Open && r.Episode == 1,
                "refused by the library once tripped");
            var t = b.ExecuteAsync(_ => Task.FromResult(0));
            Check(t.IsFaulted && t.Exception.InnerException is BreakerOpenException, "ExecuteAsync refused in its task");
            var s = b.Snapshot();
            Check(s.State == State.Open && s.Opens == 1 && s.Refusals == 2, "the books: " + s.State + " " + s.Opens + " " + s.Refusals);
            b.Dispose();
            Check(Library.LiveHandles == live, "Dispose freed it at once: " + (Library.LiveHandles - live) + " left");
            Throws<ObjectDisposedException>(() => b.Allow(), "Allow after Dispose");
        }

        /// <summary>A success must reach the library whenever the word is not clean: failures
        /// pending, a trip since admission (stale), a reset since admission (stale), metrics
        /// counting.</summary>
        static void FastSuccessNeedsACleanWord()
        {
            using (var b = new Breaker(Consecutive(3)))
            {
                var early = b.Allow();
                b.Record(b.Allow(), Outcome.Failure);
                b.Record(b.Allow(), Outcome.Failure);
                Check(b.Snapshot().Failures == 2, "two failures pending");
                Check(b.Record(early, Outcome.Success) == Effect.Counted && b.Snapshot().Failures == 0,
                    "a success with failures pending clears them (through the library)");

                var held = b.Allow();
                for (int i = 0; i < 3; i++) b.Record(b.Allow(), Outcome.Failure);
                Check(b.Snapshot().State == State.Open && b.Snapshot().Opens == 1, "three failures trip it");
                Permit none;
                BreakerOpenException refusal;
                Check(!b.TryAllow(out none, out refusal) && none == null && refusal.State == State.Open && refusal.Episode == 1,
                    "open: refused by the library");
                Check(!b.TryAllow(out none) && none == null && b.Snapshot().Refusals == 2, "refused without the refusal's details, counted");
                Check(b.Record(held, Outcome.Success) == Effect.Stale && b.Snapshot().StaleAnswers == 1,
                    "a success admitted before the trip is stale");
                b.Reset();
                var fresh = b.Allow();
                Check(fresh.Raw.RawEpisode == 2, "after the reset: episode 2");
                Check(b.Record(fresh, Outcome.Success) == Effect.Counted, "a success in the new episode");
                var old = b.Allow();
                b.ForceOpen();
                b.Reset();
                Check(b.Record(old, Outcome.Success) == Effect.Stale && b.Snapshot().StaleAnswers == 2,
                    "a success admitted before a reset is stale, the word being clean again");
                Check(b.Snapshot().State == State.Closed && b.Snapshot().Failures == 0, "closed, nothing pending");

                b.Metrics();
                for (int i = 0; i < 3; i++) b.Record(b.Allow(), Outcome.Success);
                var m = b.Metrics();
                Check(m.First(r => r.Name == "holdoff.breaker.admitted").Value == 3
                    && m.First(r => r.Series == "holdoff.breaker.outcomes{outcome=success}").Value == 3,
                    "once metrics count, every admission and success reaches the library");
            }
            using (var b = new Breaker(new BreakerOptions { Trip = TripPolicy.FailuresInWindow(2, TimeSpan.FromSeconds(10)) }))
            {
                var p = b.Allow();
                b.Record(b.Allow(), Outcome.Failure);
                Check(b.Record(p, Outcome.Success) == Effect.Counted, "a windowed policy's success");
                b.Record(b.Allow(), Outcome.Failure);
                Check(b.Snapshot().State == State.Open, "the window still holds both failures: a success does not clear it");
            }
        }

        static void FastPathAndDispose()
        {
            ulong before = Library.LiveHandles;
            var b = new Breaker(new BreakerOptions());
            var p = b.Allow();
            b.Dispose();
            Check(Library.LiveHandles == before, "Dispose frees the native breaker at once");
            Throws<ObjectDisposedException>(() => b.Allow(), "Allow after Dispose");
            Permit q;
            BreakerOpenException r;
            Throws<ObjectDisposedException>(() => b.TryAllow(out q, out r), "TryAllow after Dispose");
            Throws<ObjectDisposedException>(() => b.TryAllow(out q), "TryAllow(out permit) after Dispose");
            Throws<ObjectDisposedException>(() => b.Record(p, Outcome.Success), "a success after Dispose");
            Throws<ObjectDisposedException>(() => b.Record(p, Outcome.Failure), "a failure after Dispose");
            var t = b.ExecuteAsync(ct => Task.CompletedTask);
            Check(t.IsFaulted && t.Exception.InnerException is ObjectDisposedException, "ExecuteAsync after Dispose: in its task");
            b.Dispose();

            // A thread in the middle of reading the word holds the native breaker: Dispose waits
            // for it, and the breaker is freed once it is done.
            var held = new Breaker(new BreakerOptions());
            using (var announced = new ManualResetEventSlim())
            using (var release = new ManualResetEventSlim())
            {
                var reader = new Thread(() =>
                {
                    var slot = WordReader.Mine();
                    Interlocked.Exchange(ref slot.Reading, held);
                    announced.Set();
                    release.Wait();
                    Volatile.Write(ref slot.Reading, null);
                });
                reader.Start();
                announced.Wait();
                var disposer = new Thread(() => held.Dispose());
                disposer.Start();
                var spin = new SpinWait();
                while (!held.Closing) spin.SpinOnce();
                // Give a wrong Dispose every chance to free it (a correct one never does here).
                for (int i = 0; i < 2000 && Library.LiveHandles == before + 1; i++) Thread.Yield();
                Check(Library.LiveHandles == before + 1 && disposer.IsAlive, "Dispose waits for a reader of the word, the breaker still live");
                Throws<ObjectDisposedException>(() => held.Allow(), "closed while the reader finishes: ObjectDisposedException");
                release.Set();
                reader.Join();
                disposer.Join();
                Check(Library.LiveHandles == before, "freed once the reader is done");
            }

            // Dispose racing with readers: every call either completes or throws
            // ObjectDisposedException, and the native breaker is freed once, by whoever is last.
            for (int round = 0; round < 50; round++)
            {
                var shared = new Breaker(new BreakerOptions());
                int other = 0;
                var threads = new Thread[2];
                using (var go = new Barrier(threads.Length + 1))
                {
                    for (int i = 0; i < threads.Length; i++)
                    {
                        threads[i] = new Thread(() =>
                        {
                            go.SignalAndWait();
                            try
                            {
                                for (int k = 0; k < 100000; k++) shared.Record(shared.Allow(), Outcome.Success);
                            }
                            catch (ObjectDisposedException)
                            {
                            }
                            catch (Exception)
                            {
                                Interlocked.Increment(ref other);
                            }
                        });
                        threads[i].Start();
                    }
                    go.SignalAndWait();
                    Thread.Yield();
                    shared.Dispose();
                    foreach (var th in threads) th.Join();
                }
                if (other != 0 || Library.LiveHandles != before)
                {
                    Check(false, "round " + round + ": " + other + " unexpected exceptions, " + (Library.LiveHandles - before) + " handles left");
                    return;
                }
            }
            Check(true, "50 rounds of Dispose racing two threads: no other exception, nothing left");
        }

        static void FastExecuteAsync()
        {
            using (var b = new Breaker(Consecutive(3)))
            {
                int calls = 0;
                var t = b.ExecuteAsync(ct => { calls++; return Task.CompletedTask; });
                Check(t.Status == TaskStatus.RanToCompletion && calls == 1, "a completed success completes at once");
                Func<CancellationToken, Task> done = ct => Task.CompletedTask;
                b.ExecuteAsync(done).GetAwaiter().GetResult();
                long before = GC.GetAllocatedBytesForCurrentThread();
                for (int i = 0; i < 1000; i++) b.ExecuteAsync(done).GetAwaiter().GetResult();
                long allocated = GC.GetAllocatedBytesForCurrentThread() - before;
                Check(allocated < 1000, "ExecuteAsync of a completed success allocates nothing: " + allocated + " bytes over 1000 calls");

                var boom = new TimeoutException("slow");
                t = b.ExecuteAsync(ct => { throw boom; });
                Check(t.IsFaulted && ReferenceEquals(t.Exception.InnerException, boom), "a synchronous throw: the same exception, in the task");
                Check(b.Snapshot().Failures == 1, "recorded as a failure");
                t = b.ExecuteAsync(ct => Task.FromException(new TimeoutException("late")));
                Check(t.IsFaulted && b.Snapshot().Failures == 2, "a faulted task: a failure");
                t = b.ExecuteAsync(ct => Task.CompletedTask);
                Check(t.Status == TaskStatus.RanToCompletion && b.Snapshot().Failures == 0, "a success clears pending failures");

                using (var cts = new CancellationTokenSource())
                {
                    cts.Cancel();
                    t = b.ExecuteAsync(ct => { ct.ThrowIfCancellationRequested(); return Task.CompletedTask; }, cts.Token);
                    Check(t.IsCanceled && b.Snapshot().Failures == 0, "the caller's cancellation: a cancelled task, nothing counted");
                }
                t = b.ExecuteAsync(ct => null);
                Check(t.IsFaulted && t.Exception.InnerException is NullReferenceException && b.Snapshot().Failures == 0,
                    "a null task: a programming error, moving nothing");

                var gate = new TaskCompletionSource<bool>();
                t = b.ExecuteAsync(ct => gate.Task);
                Check(!t.IsCompleted, "a pending task");
                for (int i = 0; i < 3; i++) b.Record(b.Allow(), Outcome.Failure);
                gate.SetResult(true);
                t.Wait();
                Check(b.Snapshot().StaleAnswers == 1 && b.Snapshot().State == State.Open, "its success after a trip is stale");
                t = b.ExecuteAsync(ct => { calls++; return Task.CompletedTask; });
                Check(t.IsFaulted && t.Exception.InnerException is BreakerOpenException && calls == 1, "open: refused in the task, fn not run");
            }
        }

        /// <summary>Dispose while ExecuteAsync's function is in flight: the caller gets what the
        /// function came to (a success, or its own exception), never ObjectDisposedException; the
        /// native breaker is freed at Dispose (no call holds it) and nothing reads it after; a
        /// later call throws ObjectDisposedException. Both paths: a pending task (the async path)
        /// and a function that disposes the breaker itself and completes at once (the path without
        /// the async machinery); on a clean word and with a failure pending (the record then goes
        /// to the library).</summary>
        static void ExecuteAsyncRacingDispose()
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            ulong before = Library.LiveHandles;
            var boom = new TimeoutException("late");
            foreach (bool pending in new[] { false, true })
            {
                foreach (bool pendingFailure in new[] { false, true })
                {
                    foreach (bool throws in new[] { false, true })
                    {
                        string what = (throws ? "a failure" : "a success") + (pendingFailure ? ", a failure pending" : "")
                            + (pending ? ", completed after Dispose" : ", Dispose inside the function");
                        var b = new Breaker(Consecutive(3));
                        Check(b.OnWord, "on the word: " + what);
                        if (pendingFailure) b.Record(b.Allow(), Outcome.Failure);
                        var gate = new TaskCompletionSource<bool>();
                        Task t;
                        if (pending)
                        {
                            t = b.ExecuteAsync(ct => gate.Task);
                            Check(!t.IsCompleted, "in flight: " + what);
                            b.Dispose();
                            Check(Library.LiveHandles == before, "Dispose frees the native breaker under no call: " + what);
                            if (throws) gate.SetException(boom);
                            else gate.SetResult(true);
                        }
                        else
                        {
                            t = b.ExecuteAsync(ct =>
                            {
                                b.Dispose();
                                if (throws) throw boom;
                                return Task.CompletedTask;
                            });
                        }
                        try
                        {
                            t.Wait();
                        }
                        catch (AggregateException)
                        {
                        }
                        if (throws)
                            Check(t.IsFaulted && ReferenceEquals(t.Exception.InnerException, boom),
                                "the function's own exception: " + what + ": " + t.Status + " " + t.Exception);
                        else
                            Check(t.Status == TaskStatus.RanToCompletion, "the function's success: " + what + ": " + t.Status + " " + t.Exception);
                        Check(Library.LiveHandles == before, "nothing left alive: " + what);
                        var later = b.ExecuteAsync(ct => Task.CompletedTask);
                        Check(later.IsFaulted && later.Exception.InnerException is ObjectDisposedException, "a later call: ObjectDisposedException, " + what);
                        Throws<ObjectDisposedException>(() => b.Allow(), "Allow after: " + what);
                    }
                }
            }
        }

        /// <summary>A probe admitted by ExecuteAsync holds the native breaker through Dispose of
        /// the object that admitted it: its outcome is still recorded (on a group's breaker, which
        /// outlives the object, the probe's success closes it, its failure reopens it), the caller
        /// gets the function's success or exception, and the last one out frees the object's
        /// native breaker.</summary>
        static void ProbeRacingDispose()
        {
            var boom = new TimeoutException("the probe timed out");
            foreach (bool throws in new[] { false, true })
            {
                string what = throws ? "a probe's failure" : "a probe's success";
                var options = Consecutive(3);
                options.Recoveries = 1;
                using (var clock = new ManualClock())
                using (var g = new BreakerGroup(options, clock))
                {
                    using (var first = g.Get("a"))
                    {
                        for (int i = 0; i < 3; i++) first.Record(first.Allow(), Outcome.Failure);
                        Check(first.Snapshot().State == State.Open, "tripped: " + what);
                    }
                    clock.Advance(TimeSpan.FromSeconds(30));
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    ulong before = Library.LiveHandles;
                    var b = g.Get("a");
                    var gate = new TaskCompletionSource<bool>();
                    var t = b.ExecuteAsync(ct => gate.Task);
                    Check(!t.IsCompleted, "the probe in flight: " + what);
                    b.Dispose();
                    Check(Library.LiveHandles == before + 1, "the probe holds the object's native breaker: " + what);
                    if (throws) gate.SetException(boom);
                    else gate.SetResult(true);
                    try
                    {
                        t.Wait();
                    }
                    catch (AggregateException)
                    {
                    }
                    if (throws)
                        Check(t.IsFaulted && ReferenceEquals(t.Exception.InnerException, boom), what + ": the function's exception: " + t.Exception);
                    else
                        Check(t.Status == TaskStatus.RanToCompletion, what + ": the function's success: " + t.Status + " " + t.Exception);
                    Check(Library.LiveHandles == before, "freed by the probe's record: " + what);
                    using (var again = g.Get("a"))
                    {
                        var state = again.Snapshot().State;
                        Check(state == (throws ? State.Open : State.Closed), what + " recorded on the group's breaker: " + state);
                    }
                    var later = b.ExecuteAsync(ct => Task.CompletedTask);
                    Check(later.IsFaulted && later.Exception.InnerException is ObjectDisposedException, "a later call: ObjectDisposedException, " + what);
                }
            }
        }

        /// <summary>Dispose of a policy (and the breaker it built) while its ExecuteAsync's attempt
        /// is in flight: the caller gets the attempt's value, or its exception; nothing is left
        /// alive; a later call throws ObjectDisposedException.</summary>
        static void PolicyExecuteRacingDispose()
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            ulong before = Library.LiveHandles;
            var wrong = new InvalidOperationException("a programming error: rethrown at once");
            foreach (bool throws in new[] { false, true })
            {
                string what = throws ? "the policy: an exception" : "the policy: a value";
                var p = new Policy(new PolicyOptions());
                var gate = new TaskCompletionSource<int>();
                var t = p.ExecuteAsync(ct => gate.Task);
                Check(!t.IsCompleted, "in flight: " + what);
                p.Dispose();
                if (throws) gate.SetException(wrong);
                else gate.SetResult(42);
                try
                {
                    t.Wait();
                }
                catch (AggregateException)
                {
                }
                if (throws)
                    Check(t.IsFaulted && ReferenceEquals(t.Exception.InnerException, wrong), what + ": " + t.Status + " " + t.Exception);
                else
                    Check(t.Status == TaskStatus.RanToCompletion && t.Result == 42, what + ": " + t.Status + " " + t.Exception);
                Check(Library.LiveHandles == before, "nothing left alive: " + what + ": " + (Library.LiveHandles - before) + " left");
                var later = p.ExecuteAsync(ct => Task.FromResult(1));
                try
                {
                    later.Wait();
                }
                catch (AggregateException)
                {
                }
                Check(later.IsFaulted && later.Exception.InnerException is ObjectDisposedException,
                    "a later call: ObjectDisposedException, " + what + ": " + later.Status + " " + later.Exception);
            }
        }

        /// <summary>Rounds of: two threads recording successes on the word while a third records
        /// failures through the library (enough to trip, if no success comes between them); then,
        /// with the threads parked between steps, an exact sequence: a success with failures
        /// pending clears them, the trip comes at the threshold's failure, permits held across the
        /// trip (and across the reset after it) are stale, calls while open are refused. The
        /// threads' own counts must equal the snapshot's deltas.</summary>
        static void FastPathStress()
        {
            const int Threshold = 4, Rounds = 150, PerRound = 300, Successors = 2;
            var errors = new List<string>();
            using (var clock = new ManualClock())
            using (var b = new Breaker(Consecutive(Threshold), clock))
            using (var step = new Barrier(Successors + 2))
            {
                Check(b.OnWord, "the stress breaker decides on its word");
                long sCalls = 0, sCounted = 0, sStale = 0, sRefused = 0, fCounted = 0, fStale = 0, fRefused = 0, heldStale = 0, heldRefused = 0;
                int failuresDone = 0;
                int opensSeen = 0;
                Action<string> fail = m => { lock (errors) errors.Add(m); };
                var workers = new List<Thread>();
                for (int w = 0; w < Successors; w++)
                {
                    workers.Add(new Thread(() =>
                    {
                        for (int r = 0; r < Rounds; r++)
                        {
                            step.SignalAndWait(); // phase A
                            // Until the failures are all in (and at least PerRound calls), so
                            // that successes and failures overlap.
                            for (int i = 0; i < PerRound || (Volatile.Read(ref failuresDone) == 0 && i < 100 * PerRound); i++)
                            {
                                Interlocked.Increment(ref sCalls);
                                Permit p;
                                BreakerOpenException no;
                                if (!b.TryAllow(out p, out no))
                                {
                                    Interlocked.Increment(ref sRefused);
                                    continue;
                                }
                                var e = b.Record(p, Outcome.Success);
                                if (e == Effect.Counted) Interlocked.Increment(ref sCounted);
                                else if (e == Effect.Stale) Interlocked.Increment(ref sStale);
                                else fail("a success came to " + e);
                            }
                            step.SignalAndWait(); // end of phase A
                            step.SignalAndWait(); // main has reset if needed: hold a permit
                            var held = b.Allow();
                            var heldLonger = b.Allow();
                            step.SignalAndWait(); // main trips the breaker
                            step.SignalAndWait();
                            if (b.Record(held, Outcome.Success) == Effect.Stale) Interlocked.Increment(ref heldStale);
                            Permit none;
                            BreakerOpenException refusal;
                            if (!b.TryAllow(out none, out refusal)) Interlocked.Increment(ref heldRefused);
                            step.SignalAndWait(); // main resets: the word is clean again, in a new episode
                            step.SignalAndWait();
                            if (b.Record(heldLonger, Outcome.Success) == Effect.Stale) Interlocked.Increment(ref heldStale);
                            step.SignalAndWait(); // end of the round
                        }
                    }));
                }
                workers.Add(new Thread(() =>
                {
                    for (int r = 0; r < Rounds; r++)
                    {
                        step.SignalAndWait();
                        for (int i = 0; i < Threshold; i++)
                        {
                            Thread.SpinWait(200);
                            Permit p;
                            BreakerOpenException no;
                            if (!b.TryAllow(out p, out no))
                            {
                                Interlocked.Increment(ref fRefused);
                                continue;
                            }
                            Thread.SpinWait(200);
                            var e = b.Record(p, Outcome.Failure);
                            if (e == Effect.Counted) Interlocked.Increment(ref fCounted);
                            else if (e == Effect.Stale) Interlocked.Increment(ref fStale);
                            else fail("a failure came to " + e);
                        }
                        Volatile.Write(ref failuresDone, 1);
                        for (int k = 0; k < 7; k++) step.SignalAndWait();
                    }
                }));
                foreach (var t in workers) t.Start();
                var s0 = b.Snapshot();
                ulong opens = 0;
                for (int r = 0; r < Rounds; r++)
                {
                    var before = b.Snapshot();
                    long refusedBefore = Interlocked.Read(ref sRefused) + Interlocked.Read(ref fRefused);
                    long staleBefore = Interlocked.Read(ref sStale) + Interlocked.Read(ref fStale);
                    Volatile.Write(ref failuresDone, 0);
                    step.SignalAndWait();
                    step.SignalAndWait();
                    // Phase A's books.
                    var a = b.Snapshot();
                    var events = b.DrainEvents();
                    long refused = Interlocked.Read(ref sRefused) + Interlocked.Read(ref fRefused) - refusedBefore;
                    long stale = Interlocked.Read(ref sStale) + Interlocked.Read(ref fStale) - staleBefore;
                    bool tripped = a.State == State.Open;
                    if (tripped) opensSeen++;
                    if ((long)(a.Refusals - before.Refusals) != refused)
                        fail(string.Format("round {0}: {1} refusals seen, the breaker counted {2}", r, refused, a.Refusals - before.Refusals));
                    if ((long)(a.StaleAnswers - before.StaleAnswers) != stale)
                        fail(string.Format("round {0}: {1} stale answers seen, the breaker counted {2}", r, stale, a.StaleAnswers - before.StaleAnswers));
                    if (a.Opens - before.Opens != (tripped ? 1UL : 0UL) || events.Count(e => e.To == State.Open) != (tripped ? 1 : 0))
                        fail(string.Format("round {0}: opens {1}, open events {2}, state {3}", r, a.Opens - before.Opens, events.Count(e => e.To == State.Open), a.State));
                    if (!tripped && (refused != 0 || stale != 0 || a.Failures >= Threshold))
                        fail(string.Format("round {0}: closed, yet {1} refused, {2} stale, {3} failures", r, refused, stale, a.Failures));
                    if (tripped) b.Reset();
                    step.SignalAndWait(); // the successors take their permits
                    step.SignalAndWait();
                    // The exact sequence, the successors parked with their permits.
                    var p0 = b.Allow();
                    if (b.Record(p0, Outcome.Success) != Effect.Counted || b.Snapshot().Failures != 0)
                        fail(string.Format("round {0}: a success left {1} failures pending", r, b.Snapshot().Failures));
                    for (int i = 1; i < Threshold; i++)
                    {
                        if (b.Record(b.Allow(), Outcome.Failure) != Effect.Counted) fail("round " + r + ": a failure not counted");
                    }
                    var c = b.Snapshot();
                    if (c.State != State.Closed || c.Failures != (ulong)(Threshold - 1))
                        fail(string.Format("round {0}: after {1} failures: {2} with {3} pending", r, Threshold - 1, c.State, c.Failures));
                    b.Record(b.Allow(), Outcome.Failure);
                    c = b.Snapshot();
                    if (c.State != State.Open || c.Opens != a.Opens + 1)
                        fail(string.Format("round {0}: the threshold's failure left it {1} (opens {2})", r, c.State, c.Opens));
                    step.SignalAndWait(); // the successors record their held permits
                    step.SignalAndWait();
                    var d = b.Snapshot();
                    if (d.StaleAnswers - c.StaleAnswers != (ulong)Successors || d.Refusals - c.Refusals != (ulong)Successors)
                        fail(string.Format("round {0}: held permits: {1} stale, {2} refused; expected {3} each", r,
                            d.StaleAnswers - c.StaleAnswers, d.Refusals - c.Refusals, Successors));
                    b.Reset();
                    step.SignalAndWait(); // the successors record the permits they held across trip and reset
                    step.SignalAndWait();
                    var e2 = b.Snapshot();
                    b.DrainEvents();
                    if (e2.StaleAnswers - d.StaleAnswers != (ulong)Successors || e2.State != State.Closed || e2.Failures != 0)
                        fail(string.Format("round {0}: permits held across a reset: {1} stale, expected {2}; {3} with {4} pending", r,
                            e2.StaleAnswers - d.StaleAnswers, Successors, e2.State, e2.Failures));
                    opens = e2.Opens;
                }
                foreach (var t in workers) t.Join();
                Check(errors.Count == 0, "fast-path stress: " + string.Join("; ", errors.Take(5)));
                Check(heldStale == 2 * Successors * Rounds && heldRefused == Successors * Rounds,
                    string.Format("every held permit stale ({0}), every call while open refused ({1})", heldStale, heldRefused));
                Check(sCounted + sStale + sRefused == sCalls && sCalls >= (long)Successors * Rounds * PerRound
                    && fCounted + fStale + fRefused == (long)Threshold * Rounds,
                    "every call accounted for");
                Check(opens - s0.Opens == (ulong)(Rounds + opensSeen), "opens: one per round plus the concurrent trips: " + (opens - s0.Opens));
                Console.WriteLine("fast-path stress: {0} rounds, {1} tripped while mixed; successes {2} counted, {3} stale, {4} refused; failures {5} counted",
                    Rounds, opensSeen, sCounted, sStale, sRefused, fCounted);
            }
        }

        /// <summary>The same mix once metrics count: the word then admits nothing, so the metrics'
        /// counters equal the threads' own counts exactly.</summary>
        static void FastPathStressCounted()
        {
            using (var clock = new ManualClock())
            using (var b = new Breaker(Consecutive(1000000), clock))
            {
                b.Metrics();
                long successes = 0, failures = 0;
                var threads = new Thread[3];
                for (int t = 0; t < threads.Length; t++)
                {
                    int seed = t;
                    threads[t] = new Thread(() =>
                    {
                        for (int i = 0; i < 20000; i++)
                        {
                            bool bad = (i + seed) % 5 == 0;
                            b.Record(b.Allow(), bad ? Outcome.Failure : Outcome.Success);
                            if (bad) Interlocked.Increment(ref failures);
                            else Interlocked.Increment(ref successes);
                        }
                    });
                    threads[t].Start();
                }
                foreach (var t in threads) t.Join();
                var m = b.Metrics();
                double admitted = m.First(r => r.Name == "holdoff.breaker.admitted").Value;
                double ok = m.First(r => r.Series == "holdoff.breaker.outcomes{outcome=success}").Value;
                double bad2 = m.First(r => r.Series == "holdoff.breaker.outcomes{outcome=failure}").Value;
                Check(admitted == successes + failures && ok == successes && bad2 == failures,
                    string.Format("metrics: admitted {0}, successes {1}, failures {2}; threads: {3}, {4}", admitted, ok, bad2, successes, failures));
            }
        }
    }
}
