// API tests of the metric readings (part of ApiTests): scripted scenarios on a ManualClock, each
// object read once when it is built (that starts the counting, as an exporter's attach does),
// then the exact readings asserted through the public API.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using Holdoff.Interop;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        static void MetricsModel()
        {
            MetricLayouts();
            MetricTableRows();
            BreakerReadings();
            PolicyReadings();
            GroupReadings();
        }

        /// <summary>The readings whose value is not 0, as "series=value" sorted by series, one
        /// string: a mismatch shows every difference at once.</summary>
        static string NonZero(IReadOnlyList<MetricReading> readings)
        {
            return string.Join(" ", readings.Where(r => r.Value != 0).Select(r => r.Series + "=" + r.Value.ToString("R", CultureInfo.InvariantCulture))
                .OrderBy(s => s, StringComparer.Ordinal));
        }

        static void SameReadings(IReadOnlyList<MetricReading> got, string want, string what)
        {
            string g = NonZero(got);
            Check(g == want, what + ":\n  expected " + want + "\n  got      " + g);
        }

        static void MetricLayouts()
        {
            var s = typeof(MetricSampleC);
            Check(Marshal.SizeOf(s) == 24 && Offset(s, "Metric") == 0 && Offset(s, "Attribute") == 4 && Offset(s, "Value") == 8
                && Offset(s, "Upstream") == 16, "holdoff_metric_sample: 24 bytes, its offsets");
            var i = typeof(MetricInfoC);
            Check(Marshal.SizeOf(i) == 40 && Offset(i, "Attribute") == 24 && Offset(i, "Kind") == 32 && Offset(i, "ValueCount") == 36,
                "holdoff_metric_info: 40 bytes, its offsets");
        }

        static void MetricTableRows()
        {
            var all = MetricTable.All;
            Check(all.Count == 17, "17 metrics: " + all.Count);
            Check(all.Select((d, i) => d.Code == i).All(x => x), "each row's code is its index");
            Check(all.Select(d => d.Name).Distinct().Count() == all.Count && all.All(d => d.Name.StartsWith("holdoff.", StringComparison.Ordinal)),
                "names are distinct and under holdoff.");
            var state = all.Single(d => d.Name == "holdoff.breaker.state");
            Check(state.Kind == MetricKind.Gauge && state.Unit == "1" && state.Attribute == "state"
                && string.Join(",", state.Values) == "closed,open,half_open,forced_open,disabled", "holdoff.breaker.state's row");
            var duration = all.Single(d => d.Name == "holdoff.retry.wait.duration");
            Check(duration.Kind == MetricKind.Counter && duration.Unit == "s" && duration.Attribute == "source"
                && string.Join(",", duration.Values) == "retry_after,backoff,breaker" && duration.Description.Length > 0,
                "holdoff.retry.wait.duration's row");
            var refused = all.Single(d => d.Name == "holdoff.breaker.refused");
            Check(refused.Attribute == null && refused.Values.Count == 0 && refused.Unit == "{call}", "a row without an attribute");
        }

        /// <summary>Five failures trip the breaker, two calls are refused, the probe at 10 s
        /// succeeds and closes it.</summary>
        static void BreakerReadings()
        {
            var options = new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(5),
                OpenInterval = new BackoffOptions { Initial = TimeSpan.FromSeconds(10), Multiplier = 1, Max = TimeSpan.FromSeconds(10) },
                Recoveries = 1,
            };
            using (var clock = new ManualClock())
            using (var b = new Breaker(options, clock))
            {
                var first = b.Metrics();
                Check(first.Count == 24, "a breaker reports 24 series, zeros included: " + first.Count);
                SameReadings(first, "holdoff.breaker.state{state=closed}=1", "a new breaker");
                for (int i = 0; i < 5; i++) b.Record(b.Allow(), Outcome.Failure);
                clock.Set(TimeSpan.FromSeconds(1));
                Throws<BreakerOpenException>(() => b.Allow(), "refused at 1 s");
                clock.Set(TimeSpan.FromSeconds(2));
                Throws<BreakerOpenException>(() => b.Allow(), "refused at 2 s");
                var open = b.Metrics();
                SameReadings(open, "holdoff.breaker.admitted=5 holdoff.breaker.outcomes{outcome=failure}=5 holdoff.breaker.refused=2"
                    + " holdoff.breaker.state{state=open}=1 holdoff.breaker.transitions{reason=tripped}=1", "tripped, two refusals");
                var failures = open.FirstOrDefault(r => r.Series == "holdoff.breaker.outcomes{outcome=failure}");
                Check(failures != null && failures.Attributes.Count == 1 && failures.Attributes["outcome"] == "failure" && failures.Value == 5 && failures.Metric.Kind == MetricKind.Counter
                    && failures.Metric.Unit == "{call}", "a reading's attributes, value and row");
                clock.Set(TimeSpan.FromSeconds(10));
                var probe = b.Allow();
                Check(probe.IsProbe, "the call at 10 s is the probe");
                b.Record(probe, Outcome.Success);
                SameReadings(b.Metrics(), "holdoff.breaker.admitted=6 holdoff.breaker.outcomes{outcome=failure}=5"
                    + " holdoff.breaker.outcomes{outcome=success}=1 holdoff.breaker.probes=1 holdoff.breaker.refused=2"
                    + " holdoff.breaker.state{state=closed}=1 holdoff.breaker.transitions{reason=probe_admitted}=1"
                    + " holdoff.breaker.transitions{reason=recovered}=1 holdoff.breaker.transitions{reason=tripped}=1", "recovered");
                Check(open.First(r => r.Name == "holdoff.breaker.refused").Value == 2, "readings are a copy: later calls do not move them");
            }
            using (var b = new Breaker(new BreakerOptions()))
            {
                b.Dispose();
                Throws<ObjectDisposedException>(() => b.Metrics(), "Metrics after Dispose");
            }
        }

        /// <summary>One call through the retry helper: a refused connection (a 500 ms backoff),
        /// a Retry-After of 2 s (which opens the breaker; the retry is its probe), then a success;
        /// then a call refused while the breaker is forced open.</summary>
        static void PolicyReadings()
        {
            var waits = new List<RetryWait>();
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            using (var p = HookedPolicy(clock, new PolicyOptions { Quota = new QuotaOptions() }, waits, attempts))
            {
                SameReadings(p.Metrics(), "", "a new policy: every retry series 0");
                Check(p.Metrics().Count == 19, "a policy reports 19 retry series: " + p.Metrics().Count);
                p.Breaker.Metrics();
                SameReadings(p.Quota.Metrics(), "holdoff.quota.tokens=500", "a new quota: full");
                int n = 0;
                var got = p.Execute<string>(ct =>
                {
                    n++;
                    if (n == 1) throw new SocketException((int)SocketError.ConnectionRefused);
                    if (n == 2) throw new RetryLaterException(TimeSpan.FromSeconds(2));
                    return "ok";
                });
                Check(got == "ok" && clock.Now == TimeSpan.FromMilliseconds(2500), "the call succeeded after 2.5 s: " + clock.Now);
                p.Breaker.ForceOpen();
                Throws<BreakerOpenException>(() => p.Execute(ct => { }), "a call while forced open");
                SameReadings(p.Metrics(), "holdoff.retry.attempts=3 holdoff.retry.give_ups{reason=breaker_open}=1 holdoff.retry.retries=2"
                    + " holdoff.retry.wait.duration{source=backoff}=0.5 holdoff.retry.wait.duration{source=retry_after}=2"
                    + " holdoff.retry.waits{source=backoff}=1 holdoff.retry.waits{source=retry_after}=1", "the policy's retry series");
                SameReadings(p.Breaker.Metrics(), "holdoff.breaker.admitted=3 holdoff.breaker.outcomes{outcome=failure}=1"
                    + " holdoff.breaker.outcomes{outcome=retry_later}=1 holdoff.breaker.outcomes{outcome=success}=1 holdoff.breaker.probes=1"
                    + " holdoff.breaker.refused=1 holdoff.breaker.state{state=forced_open}=1 holdoff.breaker.transitions{reason=forced_open}=1"
                    + " holdoff.breaker.transitions{reason=probe_admitted}=1 holdoff.breaker.transitions{reason=retry_later}=1",
                    "the policy's breaker (3 probe answers close it by default: still half-open when forced open)");
                SameReadings(p.Quota.Metrics(), "holdoff.quota.tokens=495", "the quota: two retries taken (5 each), the last refunded");
            }
        }

        /// <summary>A group of two: payments trips, search succeeds, a third key evicts the idle
        /// search (payments, open, is never evicted).</summary>
        static void GroupReadings()
        {
            var template = new BreakerOptions { Trip = TripPolicy.ConsecutiveFailures(1) };
            using (var clock = new ManualClock())
            using (var g = new BreakerGroup(template, clock, 2))
            {
                SameReadings(g.Metrics(), "", "a new group: no keys");
                Action<string, Outcome> call = (key, outcome) =>
                {
                    using (var b = g.Get(key)) b.Record(b.Allow(), outcome);
                };
                call("payments", Outcome.Failure);
                call("search", Outcome.Success);
                SameReadings(g.Metrics(), "holdoff.breaker.admitted{upstream=payments}=1 holdoff.breaker.admitted{upstream=search}=1"
                    + " holdoff.breaker.outcomes{outcome=failure,upstream=payments}=1 holdoff.breaker.outcomes{outcome=success,upstream=search}=1"
                    + " holdoff.breaker.state{state=closed,upstream=search}=1 holdoff.breaker.state{state=open,upstream=payments}=1"
                    + " holdoff.breaker.transitions{reason=tripped,upstream=payments}=1 holdoff.group.keys=2", "two keys");
                call("ads", Outcome.Success);
                var readings = g.Metrics();
                SameReadings(readings, "holdoff.breaker.admitted{upstream=ads}=1 holdoff.breaker.admitted{upstream=payments}=1"
                    + " holdoff.breaker.outcomes{outcome=failure,upstream=payments}=1 holdoff.breaker.outcomes{outcome=success,upstream=ads}=1"
                    + " holdoff.breaker.state{state=closed,upstream=ads}=1 holdoff.breaker.state{state=open,upstream=payments}=1"
                    + " holdoff.breaker.transitions{reason=tripped,upstream=payments}=1 holdoff.group.evictions=1 holdoff.group.keys=2",
                    "search evicted for ads");
                Check(readings.Count == 2 + 2 * 24, "the group's two series, then 24 per kept breaker: " + readings.Count);
                Check(readings[0].Name == "holdoff.group.keys" && readings[0].Attributes.Count == 0 && readings[1].Name == "holdoff.group.evictions",
                    "the group's own series first, without an upstream");
                var open = readings.FirstOrDefault(r => r.Series == "holdoff.breaker.state{state=open,upstream=payments}");
                Check(open != null && open.Attributes.Count == 2 && open.Attributes["state"] == "open" && open.Attributes["upstream"] == "payments"
                    && open.Attributes.Keys.SequenceEqual(new[] { "state", "upstream" }), "a group reading's attributes, sorted by key");
            }
        }
    }
}
