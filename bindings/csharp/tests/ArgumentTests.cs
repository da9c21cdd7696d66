// Arguments the binding refuses before anything reaches the core: every null argument is an
// ArgumentNullException naming its parameter (never a NullReferenceException), and a value the
// core refuses in an options object is told in C# terms (the property, a TimeSpan), not in the
// neutral format's milliseconds.
using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        /// <summary>Checks that <paramref name="a"/> throws ArgumentNullException naming
        /// <paramref name="param"/>.</summary>
        static void Null(string param, Action a, string what)
        {
            var e = Throws<ArgumentNullException>(a, what);
            Check(e != null && e.ParamName == param, what + " names " + param + ": " + (e != null ? e.ParamName : ""));
        }

        static void NullArguments()
        {
            var now = DateTimeOffset.FromUnixTimeMilliseconds(0);
            using (var clock = new ManualClock())
            using (var breaker = new Breaker(new BreakerOptions(), clock))
            using (var budget = new RetryBudget(new BudgetOptions(), clock))
            using (var quota = new RetryQuota(new QuotaOptions()))
            using (var classifier = new Classifier(new ClassifierOptions()))
            using (var policy = new Policy(new PolicyOptions(), clock))
            using (var call = new PolicyCall())
            {
                Null("options", () => new Breaker((BreakerOptions)null), "new Breaker(null)");
                Null("options", () => new RetryBudget((BudgetOptions)null), "new RetryBudget(null)");
                Null("options", () => new RetryQuota((QuotaOptions)null), "new RetryQuota(null)");
                Null("options", () => new Classifier((ClassifierOptions)null), "new Classifier(null)");
                Null("options", () => new Policy(null), "new Policy(null)");
                Null("template", () => new BreakerGroup((BreakerOptions)null), "new BreakerGroup(null)");
                Null("json", () => HoldoffConfig.Parse(null), "HoldoffConfig.Parse(null)");

                Null("permit", () => breaker.Record(null, Outcome.Success), "Breaker.Record(null, ...)");
                Null("fn", () => breaker.ExecuteAsync(null), "Breaker.ExecuteAsync(null)");
                Null("state", () => budget.Decide(null, Outcome.Failure), "RetryBudget.Decide(null, ...)");
                Null("lease", () => quota.OnSuccess(null), "RetryQuota.OnSuccess(null)");
                Null("headers", () => classifier.Classify(200, null, now), "Classifier.Classify(.., null, ..)");
                Null("value", () => RetryAfter.Parse(null, now), "RetryAfter.Parse(null, ..)");
                Null("headers", () => RetryAfter.HintFromHeaders(null, now), "RetryAfter.HintFromHeaders(null, ..)");

                Null("breaker", () => Policy.Compose(null, budget, null, null), "Policy.Compose(null, ...)");
                Null("budget", () => Policy.Compose(breaker, null, null, null), "Policy.Compose(.., null, ...)");
                Null("call", () => policy.BeforeAttempt(null), "Policy.BeforeAttempt(null)");
                var go = policy.BeforeAttempt(call);
                Null("call", () => policy.AfterAttempt(null, go.Permit, Outcome.Success), "Policy.AfterAttempt(null, ...)");
                Null("permit", () => policy.AfterAttempt(call, null, Outcome.Success), "Policy.AfterAttempt(.., null, ..)");
                Classification cl;
                Null("call", () => policy.AfterResponse(null, go.Permit, 200, NoHeaders, out cl), "Policy.AfterResponse(null, ...)");
                Null("permit", () => policy.AfterResponse(call, null, 200, NoHeaders, out cl), "Policy.AfterResponse(.., null, ...)");
                Null("headers", () => policy.AfterResponse(call, go.Permit, 200, null, out cl), "Policy.AfterResponse(.., null, out ..)");
                Check(policy.AfterAttempt(call, go.Permit, Outcome.Success).Kind == DecisionKind.Done,
                    "the refused calls left the permit to record");

                Null("fn", () => policy.ExecuteAsync(null), "Policy.ExecuteAsync(null)");
                Null("fn", () => policy.ExecuteAsync<int>(null), "Policy.ExecuteAsync<T>(null)");
                Null("fn", () => policy.Execute(null), "Policy.Execute(null)");
                Null("fn", () => policy.Execute<int>(null), "Policy.Execute<T>(null)");
                Null("value", () => policy.Sleeper = null, "Policy.Sleeper = null");
                Null("policy", () => new HoldoffHandler(null), "new HoldoffHandler(null)");
                Null("policy", () => new HoldoffHandler(null, new HttpClientHandler()), "new HoldoffHandler(null, inner)");
                Null("error", () => Outcome.Classify(null), "Outcome.Classify(null)");

                Null("value", () => new BreakerOptions().Trip = null, "BreakerOptions.Trip = null");
                Null("value", () => new BreakerOptions().OpenInterval = null, "BreakerOptions.OpenInterval = null");
                Null("value", () => new BudgetOptions().Backoff = null, "BudgetOptions.Backoff = null");
                Null("value", () => new PolicyOptions().Breaker = null, "PolicyOptions.Breaker = null");
                Null("value", () => new PolicyOptions().Budget = null, "PolicyOptions.Budget = null");
                Null("value", () => new PolicyOptions().Classifier = null, "PolicyOptions.Classifier = null");
                using (var g = new BreakerGroup(new BreakerOptions(), clock))
                    Null("key", () => g.Get(null), "BreakerGroup.Get(null)");
                Check(breaker.Snapshot().State == State.Closed && (long)quota.Available == new QuotaOptions().Capacity,
                    "nothing moved by the refused calls");
            }
        }

        static void ConfigMessages()
        {
            var o = new BreakerOptions();
            o.OpenInterval.Initial = TimeSpan.FromSeconds(-1);
            var e = Throws<InvalidConfigException>(() => new Breaker(o).Dispose(), "negative open interval");
            Check(e != null && e.ParamName == "breaker.open_interval.initial" && e.Field == e.ParamName, "the field stays the core's");
            Check(e != null && e.Message.StartsWith(
                "holdoff: invalid configuration: BreakerOptions.OpenInterval.Initial must not be negative (got -00:00:01; field breaker.open_interval.initial)",
                StringComparison.Ordinal), "in TimeSpan terms: " + (e != null ? e.Message : ""));
            Check(e != null && !e.Message.Contains("millisecond"), "no milliseconds for a TimeSpan");

            o = new BreakerOptions();
            o.OpenInterval.Max = TimeSpan.FromSeconds(1);
            e = Throws<InvalidConfigException>(() => new Breaker(o).Dispose(), "max below initial");
            Check(e != null && e.Message.Contains("BreakerOptions.OpenInterval.Max must be >= BreakerOptions.OpenInterval.Initial (got 00:00:01;"),
                "the rule names the other property: " + (e != null ? e.Message : ""));

            var g = new BudgetOptions { RetryAfterCap = TimeSpan.FromMinutes(5), MaxRateLimitDuration = TimeSpan.FromMinutes(9) };
            e = Throws<InvalidConfigException>(() => new RetryBudget(g).Dispose(), "budget without room for two waits");
            Check(e != null && e.ParamName == "budget.max_rate_limit_duration" && e.Message.StartsWith(
                "holdoff: invalid configuration: BudgetOptions.MaxRateLimitDuration budget 00:09:00 against a 00:05:00 cap leaves no room "
                + "to retry: it must be at least twice BudgetOptions.RetryAfterCap", StringComparison.Ordinal),
                "the core's durations as TimeSpans: " + (e != null ? e.Message : ""));

            e = Throws<InvalidConfigException>(() => new Breaker(new BreakerOptions { Trip = TripPolicy.FailureRate(1.5, 10, TimeSpan.FromMinutes(1)) }),
                "a rate above 1");
            Check(e != null && e.ParamName == "breaker.trip.threshold"
                && e.Message.Contains("TripPolicy.FailureRate(rate) must be a rate in (0, 1] (got 1.5;"), "the factory's parameter: " + (e != null ? e.Message : ""));

            e = Throws<InvalidConfigException>(() => new Classifier(new ClassifierOptions { RateLimitDefaultWait = TimeSpan.FromMilliseconds(-1500) }),
                "a negative default wait");
            Check(e != null && e.Message.Contains("ClassifierOptions.RateLimitDefaultWait must not be negative (got -00:00:01.5000000;"),
                "a fraction of a second: " + (e != null ? e.Message : ""));

            using (var p = new Policy(new PolicyOptions()))
            {
                e = Throws<InvalidConfigException>(() => p.TotalTimeout = TimeSpan.FromSeconds(-2), "a negative total timeout");
                Check(e != null && e.ParamName == "execute.total_timeout"
                    && e.Message.Contains("Policy.TotalTimeout must not be negative (got -00:00:02;"), "the property's name: " + (e != null ? e.Message : ""));
                e = Throws<InvalidConfigException>(() => p.AttemptTimeout = TimeSpan.Zero, "a zero attempt timeout");
                Check(e != null && e.Message.Contains("Policy.AttemptTimeout must be greater than 0 (got 00:00:00;"), "zero: " + (e != null ? e.Message : ""));
            }

            // JSON the caller wrote speaks milliseconds (its keys end in _ms): the core's words stand.
            e = Throws<InvalidConfigException>(() => HoldoffConfig.Parse("{\"breaker\":{\"open_interval\":{\"initial_ms\":-3}}}").Dispose(),
                "negative milliseconds in JSON");
            Check(e != null && e.ParamName == "breaker.open_interval.initial" && e.Message.Contains("(milliseconds)"),
                "the JSON's own unit: " + (e != null ? e.Message : ""));
        }
    }
}
