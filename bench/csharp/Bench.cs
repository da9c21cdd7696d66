// The C# benchmark (bench/csharp/run.sh, release library, Mono): holdoff next to a hand-written
// lock-based consecutive-failure breaker, in one run. Polly is not measured: it installs only
// through NuGet, which this build does not use.
//
// Admission and a clean success read the breaker's fast-path word without calling into the
// library; a refusal of a breaker made without a clock is decided on its refusal block (the
// word, the deadline, Stopwatch's clock mapped onto the library's), also without a call.
// `floor` (a no-op P/Invoke, same run) is what each call into the library costs; its
// `bytes_per_breaker` (an object holding nothing but a native breaker's pointer) is the least a
// breaker can take.
//
// Each sample is one timed batch sized to ~50 ms (ns/op = batch wall time / batch size), 5
// samples after a calibration batch. Prints a summary; with HOLDOFF_BENCH_OUT=<file> it also
// appends one JSON line per (subject, op) (the cross-language benchmark's record format).
// Memory: managed bytes (GC.GetTotalMemory(true)) plus native bytes (glibc mallinfo2: the Rust
// library allocates with malloc) before and after creating 100k objects.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Bench
{
    /// <summary>The baseline: consecutive failures counted under one lock.</summary>
    sealed class LockBreaker
    {
        readonly object gate = new object();
        int failures;
        bool open;
        long openUntilTicks;
        const int Threshold = 5;
        static readonly long OpenTicks = TimeSpan.FromSeconds(30).Ticks;

        /// <summary>The clock is read only while open, as holdoff does.</summary>
        public bool TryAcquire()
        {
            lock (gate) return !open || DateTime.UtcNow.Ticks >= openUntilTicks;
        }

        public void OnSuccess()
        {
            lock (gate) { failures = 0; open = false; }
        }

        public void OnFailure()
        {
            lock (gate)
            {
                if (++failures >= Threshold)
                {
                    open = true;
                    openUntilTicks = DateTime.UtcNow.Ticks + OpenTicks;
                }
            }
        }

        public T Execute<T>(Func<T> fn)
        {
            if (!TryAcquire()) throw new InvalidOperationException("open");
            T r;
            try
            {
                r = fn();
            }
            catch
            {
                OnFailure();
                throw;
            }
            OnSuccess();
            return r;
        }
    }

    /// <summary>The bytes floor: a managed object holding one native breaker's pointer and
    /// nothing else, the least a C# breaker can be (it has no gate, so a Dispose racing a call
    /// could free the breaker under it, and no finalizer).</summary>
    sealed class NativeBreakerOnly
    {
        public readonly IntPtr Raw;

        public NativeBreakerOnly(IntPtr raw) { Raw = raw; }
    }

    static class Program
    {
        const int Samples = 5;
        const double TargetNs = 50e6;
        const int MemN = 100000;
        static StreamWriter output;

        [StructLayout(LayoutKind.Sequential)]
        struct MallInfo2
        {
            public UIntPtr Arena, Ordblks, Smblks, Hblks, Hblkhd, Usmblks, Fsmblks, Uordblks, Fordblks, Keepcost;
        }

        [DllImport("libc.so.6")]
        static extern MallInfo2 mallinfo2();

        /// <summary>The floor: a call into libholdoff that does nothing but return a constant.</summary>
        [DllImport("holdoff", CallingConvention = CallingConvention.Cdecl)]
        static extern uint holdoff_abi_version();

        [DllImport("holdoff", CallingConvention = CallingConvention.Cdecl)]
        static extern uint holdoff_clock_new_system(out IntPtr clock);

        [DllImport("holdoff", CallingConvention = CallingConvention.Cdecl)]
        static extern uint holdoff_clock_free(IntPtr clock);

        [DllImport("holdoff", CallingConvention = CallingConvention.Cdecl)]
        static extern uint holdoff_breaker_new(IntPtr config, IntPtr clock, out IntPtr breaker);

        [DllImport("holdoff", CallingConvention = CallingConvention.Cdecl)]
        static extern uint holdoff_breaker_free(IntPtr breaker);

        static double NativeBytes()
        {
            var m = mallinfo2();
            return (double)m.Uordblks.ToUInt64() + (double)m.Hblkhd.ToUInt64();
        }

        static string Json(string s)
        {
            return "\"" + s.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\"";
        }

        /// <summary>Prints the summary line; appends the record unless <paramref name="printOnly"/>.</summary>
        static void Emit(string subject, string op, string unit, double[] s, string note, bool printOnly = false)
        {
            var sorted = (double[])s.Clone();
            Array.Sort(sorted);
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "{0,-14} {1,-22} {2,10:F1} {3,-6} (min {4:F1}, max {5:F1})  {6}",
                subject, op, sorted[Samples / 2], unit, sorted[0], sorted[Samples - 1], note));
            if (output == null || printOnly) return;
            var b = new StringBuilder();
            b.Append("{\"lang\": \"csharp\", \"subject\": ").Append(Json(subject)).Append(", \"op\": ").Append(Json(op))
                .Append(", \"unit\": ").Append(Json(unit)).Append(", \"samples\": [");
            for (int i = 0; i < s.Length; i++)
                b.Append(i == 0 ? "" : ", ").Append(s[i].ToString("R", CultureInfo.InvariantCulture));
            b.Append("], \"note\": ").Append(Json(note)).Append("}");
            output.WriteLine(b.ToString());
        }

        /// <summary>Wall ns of `threads` threads each running n operations, divided by n.</summary>
        static double Timed(Action<int> batch, int n, int threads)
        {
            if (threads == 1)
            {
                var sw = Stopwatch.StartNew();
                batch(n);
                return sw.Elapsed.Ticks * (1e9 / TimeSpan.TicksPerSecond) / n;
            }
            using (var start = new Barrier(threads + 1))
            {
                var ts = new Thread[threads];
                for (int i = 0; i < threads; i++)
                {
                    ts[i] = new Thread(() => { start.SignalAndWait(); batch(n); });
                    ts[i].Start();
                }
                start.SignalAndWait();
                var sw = Stopwatch.StartNew();
                foreach (var t in ts) t.Join();
                return sw.Elapsed.Ticks * (1e9 / TimeSpan.TicksPerSecond) / n;
            }
        }

        static void Measure(string subject, string op, int threads, string note, Action<int> batch, bool printOnly = false)
        {
            int n = 1000;
            double per = Timed(batch, n, threads);
            while (per * n < TargetNs / 10)
            {
                n *= 4;
                per = Timed(batch, n, threads);
            }
            n = (int)(TargetNs / per) + 1;
            var s = new double[Samples];
            for (int i = 0; i < Samples; i++) s[i] = Timed(batch, n, threads);
            Emit(subject, op, "ns/op", s, note, printOnly);
        }

        static void Memory(string subject, string op, string note, Func<int, object> make, Action<object[]> release)
        {
            var s = new double[Samples];
            var keep = new object[MemN];
            object warm = make(-1);
            for (int r = 0; r < Samples; r++)
            {
                long m0 = GC.GetTotalMemory(true);
                double n0 = NativeBytes();
                for (int i = 0; i < MemN; i++) keep[i] = make(r * MemN + i);
                long m1 = GC.GetTotalMemory(true);
                double n1 = NativeBytes();
                s[r] = ((m1 - m0) + (n1 - n0)) / MemN;
                release(keep);
                Array.Clear(keep, 0, MemN);
            }
            GC.KeepAlive(warm);
            Emit(subject, op, "bytes", s, note);
        }

        static void DisposeAll(object[] objs)
        {
            foreach (var o in objs)
            {
                var d = o as IDisposable;
                if (d != null) d.Dispose();
            }
        }

        static int Main()
        {
            string path = Environment.GetEnvironmentVariable("HOLDOFF_BENCH_OUT");
            if (!string.IsNullOrEmpty(path)) output = new StreamWriter(path, true, new UTF8Encoding(false));
            try
            {
                Run();
            }
            finally
            {
                if (output != null) output.Dispose();
            }
            return 0;
        }

        static void Run()
        {
            Console.WriteLine("holdoff {0} via P/Invoke (release library), Mono {1}, {2} samples of ~{3} ms; median (min, max)",
                Library.Version, Environment.Version, Samples, TargetNs / 1e6);
            var ok = Outcome.Success;

            Measure("floor", "noop_crossing", 1, "holdoff_abi_version() through P/Invoke (no arguments, returns a uint): the crossing alone", n =>
            {
                for (int i = 0; i < n; i++)
                    if (holdoff_abi_version() != Library.AbiVersion) throw new InvalidOperationException("abi");
            });

            using (var b = new Breaker(new BreakerOptions()))
            {
                var lb = new LockBreaker();
                Action<int> h = n => { for (int i = 0; i < n; i++) b.Record(b.Allow(), ok); };
                Action<int> l = n =>
                {
                    for (int i = 0; i < n; i++)
                    {
                        if (!lb.TryAcquire()) throw new InvalidOperationException("refused");
                        lb.OnSuccess();
                    }
                };
                Measure("holdoff", "allow_record", 1, "b.Record(b.Allow(), Outcome.Success), closed, defaults", h);
                Measure("lock-baseline", "allow_record", 1, "TryAcquire() + OnSuccess(): lock + check, lock + reset", l);
                const string two = "; 2 threads sharing one breaker, wall ns / ops per thread";
                Measure("holdoff", "allow_record_2t", 2, "b.Record(b.Allow(), Outcome.Success)" + two, h);
                Measure("lock-baseline", "allow_record_2t", 2, "TryAcquire() + OnSuccess()" + two, l);
            }

            // Tripped as the baseline is: 5 consecutive failures, open for 30 s (longer than the
            // run), the clock read on every refusal.
            var tripped = new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(5),
                OpenInterval = new BackoffOptions { Initial = TimeSpan.FromSeconds(30), Multiplier = 1, Max = TimeSpan.FromSeconds(30) },
            };
            using (var b = new Breaker(tripped))
            {
                for (int i = 0; i < 5; i++) b.Record(b.Allow(), Outcome.Failure);
                if (b.Snapshot().State != State.Open) throw new InvalidOperationException("not tripped");
                Measure("holdoff", "refuse_open", 1, "b.TryAllow(out permit) -> false (tripped by 5 failures, waiting for its probe: refusal block + clock, no P/Invoke, no refusal object)", n =>
                {
                    Permit p;
                    for (int i = 0; i < n; i++)
                        if (b.TryAllow(out p)) throw new InvalidOperationException("admitted");
                });
                var lb = new LockBreaker();
                for (int i = 0; i < 5; i++) lb.OnFailure();
                Measure("lock-baseline", "refuse_open", 1, "TryAcquire() -> false (open: lock, clock read)", n =>
                {
                    for (int i = 0; i < n; i++)
                        if (lb.TryAcquire()) throw new InvalidOperationException("admitted");
                });
                // Printed only: the same refusal with its BreakerOpenException (an Exception object
                // costs more than the refusal on Mono).
                Measure("holdoff", "(refuse_open, refusal)", 1, "b.TryAllow(out permit, out refusal) -> false (tripped)", n =>
                {
                    Permit p;
                    BreakerOpenException refusal;
                    for (int i = 0; i < n; i++)
                        if (b.TryAllow(out p, out refusal)) throw new InvalidOperationException("admitted");
                }, printOnly: true);
            }

            using (var b = new Breaker(new BreakerOptions()))
            {
                b.ForceOpen();
                Measure("holdoff", "(refuse_open, forced)", 1, "b.TryAllow(out permit) -> false (forced open: the word alone, no clock)", n =>
                {
                    Permit p;
                    for (int i = 0; i < n; i++)
                        if (b.TryAllow(out p)) throw new InvalidOperationException("admitted");
                });
            }

            using (var budget = new RetryBudget(new BudgetOptions()))
            {
                var later = Outcome.RetryLater(TimeSpan.FromSeconds(1));
                Measure("holdoff", "budget_429", 1, "using (var s = new RetryState()) budget.Decide(s, Outcome.RetryLater(1 s))", n =>
                {
                    for (int i = 0; i < n; i++)
                        using (var s = new RetryState())
                            if (budget.Decide(s, later).Kind != DecisionKind.Retry) throw new InvalidOperationException("not retry");
                });
            }

            using (var pcb = new Breaker(new BreakerOptions()))
            {
                // The breaker's own helper, as the baseline is a breaker (Policy.ExecuteAsync adds
                // the retry budget's per-call state).
                Func<CancellationToken, Task> fn = ct => Task.CompletedTask;
                Measure("holdoff", "protected_call", 1,
                    "breaker.ExecuteAsync(ct => Task.CompletedTask).GetAwaiter().GetResult()", n =>
                {
                    for (int i = 0; i < n; i++) pcb.ExecuteAsync(fn).GetAwaiter().GetResult();
                });
                var lb = new LockBreaker();
                Func<int> trivial = () => 1;
                Measure("lock-baseline", "protected_call", 1, "lb.Execute(() => 1) (synchronous)", n =>
                {
                    for (int i = 0; i < n; i++) lb.Execute(trivial);
                });
            }

            foreach (var g in new[] { Tuple.Create("group_lookup_10", 10), Tuple.Create("group_lookup_10k", 10000), Tuple.Create("group_lookup_1m", 1000000) })
            {
                using (var group = new BreakerGroup(new BreakerOptions(), null, g.Item2))
                {
                    var keys = new string[g.Item2];
                    for (int i = 0; i < keys.Length; i++)
                    {
                        keys[i] = "host-" + i.ToString(CultureInfo.InvariantCulture);
                        group.Get(keys[i]).Dispose();
                    }
                    Measure("holdoff", g.Item1, 1, "using (group.Get(key)) (existing key), " + g.Item2 + " keys, scattered order", n =>
                    {
                        int k = 0;
                        for (int i = 0; i < n; i++)
                        {
                            k = (k + 7919) % keys.Length;
                            group.Get(keys[k]).Dispose();
                        }
                    });
                }
            }

            var opts = new BreakerOptions();
            Memory("holdoff", "bytes_per_breaker", "managed (GC.GetTotalMemory) + native (mallinfo2) delta over 100k new Breaker(defaults)",
                i => new Breaker(opts), DisposeAll);
            // The floor of the same figure: what holdoff's Breaker holds (one native breaker on one
            // shared system clock, as Breaker(defaults) makes) in the smallest managed object.
            IntPtr floorClock;
            if (holdoff_clock_new_system(out floorClock) != 0) throw new InvalidOperationException("holdoff_clock_new_system");
            var floorObjects = new List<NativeBreakerOnly>();
            Memory("floor", "bytes_per_breaker",
                "managed + native delta over 100k objects holding one IntPtr each, from holdoff_breaker_new(NULL: the defaults, one system clock) through P/Invoke: the least a C# breaker can be",
                i =>
                {
                    IntPtr raw;
                    if (holdoff_breaker_new(IntPtr.Zero, floorClock, out raw) != 0) throw new InvalidOperationException("holdoff_breaker_new");
                    var o = new NativeBreakerOnly(raw);
                    if (i < 0) floorObjects.Add(o);
                    return o;
                },
                objs => { foreach (NativeBreakerOnly o in objs) holdoff_breaker_free(o.Raw); });
            foreach (var o in floorObjects) holdoff_breaker_free(o.Raw);
            holdoff_clock_free(floorClock);
            Memory("lock-baseline", "bytes_per_breaker", "GC.GetTotalMemory delta over 100k new LockBreaker()",
                i => new LockBreaker(), objs => { });
            BreakerGroup mg = null;
            Memory("holdoff", "bytes_per_group_entry",
                "managed + native delta over 100k new keys host-N in one group (the core's entry; each Breaker object disposed at once)",
                i =>
                {
                    if (i < 0) return null;
                    if (i % MemN == 0) mg = new BreakerGroup(opts, null, MemN);
                    mg.Get("host-" + i.ToString(CultureInfo.InvariantCulture)).Dispose();
                    return mg;
                },
                objs => mg.Dispose());
        }
    }
}
