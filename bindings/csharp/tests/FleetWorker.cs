// The C# worker of the multi-process fleet test (contract: conformance/fleet/README.md), run by
// bindings/csharp/run.sh test through `conformance/fleet/run.py csharp -- mono FleetWorker.exe`.
// It calls the upstream through one breaker shared with the other workers through the fleet,
// for RUN_MS, and writes its report to OUT.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Net.Http;
using System.Threading;

namespace Holdoff.Tests
{
    static class FleetWorker
    {
        static readonly string Self = Environment.GetEnvironmentVariable("WORKER_ID");
        static readonly Dictionary<string, int> Statuses = new Dictionary<string, int>();
        static readonly List<double> RefusalStarts = new List<double>();
        static int allowed, refused, errors;
        static double slowestMs;

        /// <summary>Runs one breaker call, keeping the slowest.</summary>
        static T Timed<T>(Func<T> f)
        {
            var sw = Stopwatch.StartNew();
            try { return f(); }
            finally { slowestMs = Math.Max(slowestMs, sw.Elapsed.TotalMilliseconds); }
        }

        static double EpochMs() { return (DateTime.UtcNow - new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc)).TotalMilliseconds; }

        /// <summary>One call; true if the breaker refused it.</summary>
        static bool Call(Breaker breaker, HttpClient http, string upstream, bool wasRefused)
        {
            Permit permit = null;
            BreakerOpenException refusal = null;
            if (!Timed(() => breaker.TryAllow(out permit, out refusal)))
            {
                refused++;
                if (!wasRefused) RefusalStarts.Add(EpochMs());
                return true;
            }
            allowed++;
            Outcome outcome = Outcome.Failure;
            int status = 0;
            try
            {
                var req = new HttpRequestMessage(HttpMethod.Get, upstream + "/call");
                req.Headers.Add("X-Worker-Id", Self);
                using (var res = http.SendAsync(req).GetAwaiter().GetResult())
                {
                    status = (int)res.StatusCode;
                    string key = status.ToString(CultureInfo.InvariantCulture);
                    Statuses[key] = (Statuses.ContainsKey(key) ? Statuses[key] : 0) + 1;
                    if (status == 200) outcome = Outcome.Success;
                    else if (status == 429)
                    {
                        var after = res.Headers.RetryAfter;
                        var delay = after != null && after.Delta.HasValue ? after.Delta.Value : TimeSpan.FromSeconds(1);
                        outcome = Outcome.RetryLater(delay);
                    }
                }
            }
            catch (Exception e) when (e is HttpRequestException || e is System.Threading.Tasks.TaskCanceledException)
            {
                Console.Error.WriteLine("worker {0}: {1}", Self, e.Message);
                errors++;
            }
            Timed(() => breaker.Record(permit, outcome));
            if (status == 200) Thread.Sleep(10);
            return false;
        }

        static int Main()
        {
            int runMs = int.Parse(Environment.GetEnvironmentVariable("RUN_MS"), CultureInfo.InvariantCulture);
            var options = new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(1),
                OpenInterval = new BackoffOptions
                {
                    Initial = TimeSpan.FromMilliseconds(500), Multiplier = 1, Max = TimeSpan.FromMilliseconds(500),
                },
                Recoveries = 2,
                MaxProbesInFlight = 1,
                Fleet = new FleetOptions(Environment.GetEnvironmentVariable("HOLDOFF_FLEET_URL"),
                    Environment.GetEnvironmentVariable("HOLDOFF_FLEET_KEY")) { Refresh = TimeSpan.FromMilliseconds(20) },
            };
            string upstream = Environment.GetEnvironmentVariable("UPSTREAM_URL");
            int started = 0, ended = 0;
            using (var http = new HttpClient { Timeout = TimeSpan.FromSeconds(2) })
            using (var breaker = new Breaker(options))
            {
                var clock = Stopwatch.StartNew();
                bool wasRefused = false;
                while (clock.ElapsedMilliseconds < runMs)
                {
                    started++;
                    try
                    {
                        wasRefused = Call(breaker, http, upstream, wasRefused);
                    }
                    catch (Exception e)
                    {
                        Console.Error.WriteLine("worker {0}: {1}", Self, e);
                        errors++;
                        wasRefused = false;
                    }
                    ended++;
                    if (wasRefused) Thread.Sleep(5);
                }
            } // disposing the breaker joins its fleet's background thread and closes its sockets
            var statuses = string.Join(",", Statuses.Select(kv => "\"" + kv.Key + "\":" + kv.Value));
            var starts = string.Join(",", RefusalStarts.Select(t => t.ToString("R", CultureInfo.InvariantCulture)));
            File.WriteAllText(Environment.GetEnvironmentVariable("OUT"), string.Format(CultureInfo.InvariantCulture,
                "{{\"worker\":\"{0}\",\"calls_started\":{1},\"calls_ended\":{2},\"allowed\":{3},\"refused\":{4},\"errors\":{5}," +
                "\"statuses\":{{{6}}},\"slowest_breaker_call_ms\":{7},\"refusal_starts\":[{8}]}}",
                Self, started, ended, allowed, refused, errors, statuses, slowestMs.ToString("R", CultureInfo.InvariantCulture), starts));
            return 0;
        }
    }
}
