// A deadline storm on the manual clock, through Policy.ExecuteAsync (as bindings/c's
// test_execution_deadline_storm does through the C ABI).
//
// The upstream refuses the first connection at once (it fell over), then accepts every
// connection and never answers (it hangs). Twenty callers share one policy (trip after 1 failure,
// a constant 1 s open interval, no retries); caller i starts a call at i * 5 ms and then every
// 100 ms until 6 s (1201 calls), each attempt bounded by a 100 ms attempt timeout that the
// helper's own timer (the sleeper, on the manual clock) enforces.
//
// A deadline is a timeout, a failure: the breaker opens and each hanging probe re-opens it for
// another interval from its deadline, so the upstream sees the tripping request at 0 and one
// probe per interval at 1000, 2100, 3200, 4300 and 5400 ms: 6 requests (at most the 7 a 1 s
// interval allows in 6 s), and the breaker ends open. Were a deadline recorded as a cancellation,
// the breaker would stay half-open and be probed every second.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        static void DeadlineStorm()
        {
            const int callers = 20;
            var second = TimeSpan.FromSeconds(1);
            var o = new PolicyOptions
            {
                Breaker = new BreakerOptions
                {
                    Trip = TripPolicy.ConsecutiveFailures(1),
                    OpenInterval = new BackoffOptions { Initial = second, Multiplier = 1, Max = second, Jitter = 0 },
                },
                Budget = new BudgetOptions { MaxRetries = 0 },
            };
            using (var clock = new ManualClock())
            using (var p = new Policy(o, clock))
            {
                var time = new TestTime(clock);
                time.Attach(p);
                p.AttemptTimeout = TimeSpan.FromMilliseconds(100);
                var requests = new List<double>();
                Func<CancellationToken, Task<int>> upstream = ct =>
                {
                    requests.Add(clock.Now.TotalMilliseconds);
                    if (requests.Count == 1) throw new SocketException((int)SocketError.ConnectionRefused);
                    return Hang<int>(ct);
                };
                var inFlight = new Task<int>[callers];
                var deadlines = new TimeSpan[callers];
                int calls = 0, refused = 0, gaveUp = 0, timeouts = 0, other = 0, maxInFlight = 0, late = 0, busy = 0;
                Action<Task<int>> tally = t =>
                {
                    var e = t.Exception != null ? t.Exception.InnerException : null;
                    var open = e as BreakerOpenException;
                    var gu = e as GiveUpException;
                    if (open != null && open.Attempts == 0) refused++;
                    else if (gu != null && gu.Reason == GiveUpReason.AttemptsExhausted && gu.Attempts == 1)
                    {
                        gaveUp++;
                        if (gu.InnerException is TimeoutException) timeouts++;
                    }
                    else other++;
                };
                for (var t = TimeSpan.Zero; t <= TimeSpan.FromMilliseconds(6100); t += TimeSpan.FromMilliseconds(5))
                {
                    // Attempts whose time limit has passed end first (their timers fire).
                    time.Set(t);
                    for (int i = 0; i < callers; i++)
                    {
                        if (inFlight[i] == null || deadlines[i] > t) continue;
                        if (!Ended(inFlight[i])) late++;
                        tally(inFlight[i]);
                        inFlight[i] = null;
                    }
                    maxInFlight = Math.Max(maxInFlight, inFlight.Count(c => c != null));
                    if (t > TimeSpan.FromMilliseconds(6000)) continue;
                    // Then the caller whose turn it is starts a call.
                    int k = (int)(t.Ticks / TimeSpan.TicksPerMillisecond / 5 % callers);
                    if (inFlight[k] != null) busy++;
                    calls++;
                    var call = p.ExecuteAsync(upstream);
                    if (call.IsCompleted)
                    {
                        tally(call);
                        continue;
                    }
                    inFlight[k] = call;
                    deadlines[k] = t + p.AttemptTimeout.Value;
                }
                Check(requests.SequenceEqual(new double[] { 0, 1000, 2100, 3200, 4300, 5400 }) && requests.Count <= 7,
                    "storm: the upstream saw one request per interval: " + string.Join(", ", requests));
                Check(calls == 1201 && refused == calls - requests.Count, "storm: every other call refused at once: " + refused + " of " + calls);
                Check(gaveUp == requests.Count && timeouts == requests.Count - 1 && other == 0,
                    string.Format("storm: each admitted call gave up with its deadline attached ({0} gave up, {1} timeouts, {2} other)", gaveUp, timeouts, other));
                Check(maxInFlight == 1 && time.Pending == 0 && late == 0 && busy == 0,
                    string.Format("storm: one hanging probe at a time, each ended at its deadline, no timer left ({0} late, {1} busy)", late, busy));
                var s = p.Breaker.Snapshot();
                Check(s.State == State.Open && s.Opens == 1 && s.Closes == 0 && s.Probes == 5 && s.ProbesInFlight == 0 && s.Refusals == (ulong)refused,
                    string.Format("storm: the breaker ends open ({0}, opens {1}, closes {2}, probes {3})", Names.Of(s.State), s.Opens, s.Closes, s.Probes));
            }
        }
    }
}
