// The C# conformance runner: every case of conformance/cases through the Holdoff API,
// following conformance/README.md (mirrors core/tests/conformance.rs). Prints one line per case,
// one per (case, helper flavour) for a case with an `execute` step (ConformanceExecute.cs), and
// ends with `N passed, N failed, N skipped`. HOLDOFF_CASES=substring filters case ids.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;

namespace Holdoff.Tests
{
    sealed class CaseFailure : Exception
    {
        public CaseFailure(string message) : base(message) { }
    }

    /// <summary>A permit with the breaker object that admitted it: it is recorded there, as user
    /// code does, never on whatever the group holds for the key by then.</summary>
    sealed class NamedPermit
    {
        public Permit Permit;
        public Breaker Breaker;
    }

    sealed class Ctx : IDisposable
    {
        public ManualClock Clock;
        public HoldoffConfig Config;
        public Breaker Breaker;
        public BreakerGroup Group;
        public RetryBudget Budget;
        public RetryQuota Quota;
        public Classifier Classifier;
        public Policy Policy;
        /// <summary>The helper flavour an `execute` step runs through (null without one).</summary>
        public string Flavour;
        public readonly Dictionary<string, NamedPermit> Permits = new Dictionary<string, NamedPermit>();
        public readonly Dictionary<string, RetryState> States = new Dictionary<string, RetryState>();
        public readonly Dictionary<string, PolicyCall> Calls = new Dictionary<string, PolicyCall>();
        public readonly Dictionary<string, QuotaLease> Leases = new Dictionary<string, QuotaLease>();
        /// <summary>The breaker objects the group handed out (the runner owns and disposes them).</summary>
        public readonly List<Breaker> FromGroup = new List<Breaker>();
        /// <summary>A fleet case's later worker: the clock and configuration are the first's.</summary>
        public bool Borrowed;

        public void Dispose()
        {
            foreach (var b in FromGroup) b.Dispose();
            foreach (var s in States.Values) s.Dispose();
            foreach (var c in Calls.Values) c.Dispose();
            foreach (IDisposable d in new IDisposable[] { Policy, Classifier, Quota, Budget, Group, Breaker })
                if (d != null) d.Dispose();
            if (Borrowed) return;
            if (Config != null) Config.Dispose();
            if (Clock != null) Clock.Dispose();
        }
    }

    static class Conformance
    {
        const int SuiteVersion = 4;

        internal static object Ms(TimeSpan d)
        {
            long ticks = d.Ticks;
            if (ticks % TimeSpan.TicksPerMillisecond == 0) return (double)(ticks / TimeSpan.TicksPerMillisecond);
            return ticks / 10000.0;
        }

        internal static object OptMs(TimeSpan? d) { return d.HasValue ? Ms(d.Value) : null; }

        static double? AsNumber(object o)
        {
            if (o is double) return (double)o;
            if (o is int) return (int)o;
            if (o is uint) return (uint)o;
            if (o is long) return (long)o;
            if (o is ulong) return (ulong)o;
            return null;
        }

        static bool Same(JsonNode want, object got)
        {
            switch (want.Kind)
            {
                case JsonKind.Null: return got == null;
                case JsonKind.Bool: return got is bool && (bool)got == want.Bool;
                case JsonKind.String: return got is string && (string)got == want.String;
                case JsonKind.Number:
                    var n = AsNumber(got);
                    return n.HasValue && n.Value == want.Number;
                case JsonKind.Array:
                    var list = got as IList;
                    if (list == null || got is string || list.Count != want.Items.Count) return false;
                    for (int i = 0; i < list.Count; i++)
                        if (!Same(want.Items[i], list[i])) return false;
                    return true;
            }
            return false;
        }

        internal static string Show(object o)
        {
            if (o == null) return "null";
            if (o is bool) return (bool)o ? "true" : "false";
            if (o is string) return "\"" + o + "\"";
            var list = o as IList;
            if (list != null) return "[" + string.Join(",", list.Cast<object>().Select(Show)) + "]";
            var n = AsNumber(o);
            return n.HasValue ? n.Value.ToString("R", CultureInfo.InvariantCulture) : o.ToString();
        }

        static string ShowAll(Dictionary<string, object> a)
        {
            return "{" + string.Join(",", a.Select(kv => "\"" + kv.Key + "\":" + Show(kv.Value))) + "}";
        }

        internal static void Check(JsonNode expect, Dictionary<string, object> actual, params string[] known)
        {
            if (expect == null) return;
            if (expect.Kind != JsonKind.Object) throw new CaseFailure("expect must be an object");
            foreach (var f in expect.Fields)
            {
                if (Array.IndexOf(known, f.Key) < 0) throw new CaseFailure("unknown expect key \"" + f.Key + "\"");
                object got;
                actual.TryGetValue(f.Key, out got);
                if (!Same(f.Value, got))
                    throw new CaseFailure(string.Format("{0}: expected {1}, got {2}  (all: {3})", f.Key, f.Value.Raw, Show(got), ShowAll(actual)));
            }
        }

        internal static Outcome OutcomeOf(JsonNode v)
        {
            if (v == null) throw new CaseFailure("the step needs an outcome");
            if (v.Kind == JsonKind.String)
            {
                switch (v.String)
                {
                    case "success": return Outcome.Success;
                    case "answer": return Outcome.Answer;
                    case "failure": return Outcome.Failure;
                    case "timeout": return Outcome.Timeout;
                    case "cancelled": return Outcome.Cancelled;
                }
                throw new CaseFailure("unknown outcome \"" + v.String + "\"");
            }
            var ms = v.U64("retry_later_ms");
            if (ms.HasValue) return Outcome.RetryLater(TimeSpan.FromTicks((long)ms.Value * TimeSpan.TicksPerMillisecond));
            throw new CaseFailure("bad outcome " + v.Raw);
        }

        static bool IsHoldoff(Exception e) { return e is HoldoffException || e is InvalidInputException; }

        static string ErrName(Exception e)
        {
            var he = e as HoldoffException;
            if (he != null) return he.Name;
            var ie = e as InvalidInputException;
            if (ie != null) return ie.Name;
            var ce = e as InvalidConfigException;
            if (ce != null) return ce.Name;
            return "unknown: " + e.Message;
        }

        static Dictionary<string, object> DecisionObj(Decision d)
        {
            var a = new Dictionary<string, object> { { "decision", Names.Of(d.Kind) } };
            if (d.Kind == DecisionKind.Retry)
            {
                a["delay_ms"] = Ms(d.Delay);
                a["source"] = Names.Of(d.Source.Value);
                a["server_delay_ms"] = OptMs(d.ServerDelay);
                a["capped"] = d.Capped;
            }
            else if (d.Kind == DecisionKind.GiveUp)
            {
                a["reason"] = Names.Of(d.Reason.Value);
                a["server_delay_ms"] = OptMs(d.ServerDelay);
            }
            return a;
        }

        internal static List<KeyValuePair<string, string>> Headers(JsonNode step)
        {
            var list = step.Get("headers");
            var hs = new List<KeyValuePair<string, string>>();
            if (list == null) return hs;
            if (list.Kind != JsonKind.Array) throw new CaseFailure("headers must be an array");
            foreach (var p in list.Items)
            {
                if (p.Kind != JsonKind.Array || p.Items.Count != 2 || p.Items[0].Kind != JsonKind.String || p.Items[1].Kind != JsonKind.String)
                    throw new CaseFailure("bad header " + p.Raw);
                hs.Add(new KeyValuePair<string, string>(p.Items[0].String, p.Items[1].String));
            }
            return hs;
        }

        /// <summary>One worker's objects: the first worker (<paramref name="first"/> null) parses
        /// the configuration and makes the manual clock; every later worker of a fleet case builds
        /// from the same two.</summary>
        static Ctx Build(JsonNode cs, Ctx first)
        {
            var c = new Ctx();
            try
            {
                if (first != null)
                {
                    c.Config = first.Config;
                    c.Clock = first.Clock;
                    c.Borrowed = true;
                }
                else
                {
                    var config = cs.Get("config");
                    c.Config = HoldoffConfig.Parse(config != null ? config.Raw : "{}");
                    var clock = cs.Get("clock");
                    ulong origin = clock != null ? (clock.U64("wall_origin_unix_ms") ?? 0) : 0;
                    c.Clock = new ManualClock(DateTimeOffset.FromUnixTimeMilliseconds((long)origin));
                }
                var parts = c.Config.Parts;
                if ((parts & ConfigParts.Breaker) != 0)
                {
                    if (cs.True("group")) c.Group = c.Config.NewBreakerGroup(c.Clock);
                    else c.Breaker = c.Config.NewBreaker(c.Clock);
                }
                if ((parts & ConfigParts.Budget) != 0) c.Budget = c.Config.NewRetryBudget(c.Clock);
                if ((parts & ConfigParts.Quota) != 0) c.Quota = c.Config.NewRetryQuota();
                c.Classifier = c.Config.NewClassifier();
                if (cs.True("policy"))
                {
                    c.Policy = Policy.Compose(c.Breaker, c.Budget, c.Quota, c.Classifier);
                    c.Policy.AttemptTimeout = c.Config.AttemptTimeout;
                    c.Policy.TotalTimeout = c.Config.TotalTimeout;
                }
                // Counting starts at an object's first read (conformance/README.md, Metrics):
                // every object is read once now, before the first step, as an exporter does.
                if (c.Breaker != null) c.Breaker.Metrics();
                if (c.Group != null) c.Group.Metrics();
                if (c.Quota != null) c.Quota.Metrics();
                if (c.Policy != null) c.Policy.Metrics();
                return c;
            }
            catch
            {
                c.Dispose();
                throw;
            }
        }

        /// <summary>The case's breaker, or the group's for <paramref name="key"/>: a step naming a
        /// key asks the group once (which marks the key used, and may evict or overflow).</summary>
        static Breaker BreakerFor(Ctx c, string key)
        {
            if (key != null)
            {
                if (c.Group == null) throw new CaseFailure("step names a key but the case has no group");
                var b = c.Group.Get(key);
                c.FromGroup.Add(b);
                return b;
            }
            if (c.Breaker == null) throw new CaseFailure("the case has no breaker");
            return c.Breaker;
        }

        static bool Allow(Ctx c, JsonNode step, Dictionary<string, object> a)
        {
            var b = BreakerFor(c, step.Str("key", null));
            Permit p;
            BreakerOpenException refusal;
            if (b.TryAllow(out p, out refusal))
            {
                a["admitted"] = true;
                a["episode"] = p.Episode;
                a["probe"] = p.IsProbe;
                c.Permits[step.Str("as", "_last")] = new NamedPermit { Permit = p, Breaker = b };
                return true;
            }
            a["admitted"] = false;
            a["retry_after_ms"] = OptMs(refusal.RetryAfter);
            a["state"] = Names.Of(refusal.State.Value);
            return false;
        }

        static void Record(Ctx c, string name, Outcome o, Dictionary<string, object> a)
        {
            NamedPermit np;
            if (!c.Permits.TryGetValue(name, out np)) throw new CaseFailure("no permit named \"" + name + "\"");
            try
            {
                a["effect"] = Names.Of(np.Breaker.Record(np.Permit, o));
            }
            catch (Exception e) when (IsHoldoff(e))
            {
                a["error"] = ErrName(e);
            }
        }

        static void Hint(Hint h, Dictionary<string, object> a)
        {
            if (h.Unusable == Unusable.Usable) a["delay_ms"] = Ms(h.Delay);
            else a["unusable"] = Names.Of(h.Unusable);
        }

        static PolicyCall CallOf(Ctx c, string name)
        {
            PolicyCall call;
            if (!c.Calls.TryGetValue(name, out call)) c.Calls[name] = call = new PolicyCall();
            return call;
        }

        static void Step(Ctx c, JsonNode step)
        {
            string op = step.Str("op", null);
            var expect = step.Get("expect");
            string callName = step.Str("call", "default");
            var a = new Dictionary<string, object>();
            switch (op)
            {
                case "allow":
                    Allow(c, step, a);
                    Check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state");
                    return;
                case "record":
                {
                    string name = step.Str("permit", null);
                    if (name == null) throw new CaseFailure("record needs permit");
                    Record(c, name, OutcomeOf(step.Get("outcome")), a);
                    Check(expect, a, "effect", "error");
                    return;
                }
                case "call":
                {
                    var o = OutcomeOf(step.Get("outcome"));
                    if (Allow(c, step, a)) Record(c, step.Str("as", "_last"), o, a);
                    Check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state", "effect");
                    return;
                }
                case "record_foreign":
                {
                    NamedPermit np;
                    string name = step.Str("permit", "");
                    if (!c.Permits.TryGetValue(name, out np)) throw new CaseFailure("no permit named \"" + name + "\"");
                    using (var other = c.Config.NewBreaker(c.Clock))
                    {
                        try
                        {
                            other.Record(np.Permit, Outcome.Success);
                            a["effect"] = "counted";
                        }
                        catch (Exception e) when (IsHoldoff(e))
                        {
                            a["error"] = ErrName(e);
                        }
                    }
                    Check(expect, a, "error", "effect");
                    return;
                }
                case "snapshot":
                {
                    var s = BreakerFor(c, step.Str("key", null)).Snapshot();
                    a["state"] = Names.Of(s.State);
                    a["episode"] = s.Episode;
                    a["failures"] = s.Failures;
                    a["recoveries"] = s.Recoveries;
                    a["probes_in_flight"] = s.ProbesInFlight;
                    a["retry_after_ms"] = OptMs(s.RetryAfter);
                    a["probe_ready"] = s.ProbeReady;
                    a["interval_ms"] = OptMs(s.Interval);
                    a["opens"] = s.Opens;
                    a["closes"] = s.Closes;
                    a["probes"] = s.Probes;
                    a["refusals"] = s.Refusals;
                    a["stale_answers"] = s.StaleAnswers;
                    Check(expect, a, "state", "episode", "failures", "recoveries", "probes_in_flight", "retry_after_ms",
                        "probe_ready", "interval_ms", "opens", "closes", "probes", "refusals", "stale_answers");
                    return;
                }
                case "events":
                {
                    var got = BreakerFor(c, step.Str("key", null)).DrainEvents().Select(e => new Dictionary<string, object>
                    {
                        { "at", (double)(e.At.Ticks / TimeSpan.TicksPerMillisecond) }, { "from", Names.Of(e.From) },
                        { "to", Names.Of(e.To) }, { "episode", e.Episode }, { "reason", Names.Of(e.Reason) },
                        { "requested_delay_ms", OptMs(e.RequestedDelay) }, { "open_for_ms", OptMs(e.OpenFor) },
                    }).ToList();
                    if (expect == null || expect.Kind != JsonKind.Array) throw new CaseFailure("events expects an array");
                    if (expect.Items.Count != got.Count)
                        throw new CaseFailure(string.Format("expected {0} events, got {1}: [{2}]", expect.Items.Count, got.Count,
                            string.Join(",", got.Select(ShowAll))));
                    for (int i = 0; i < got.Count; i++)
                    {
                        try
                        {
                            Check(expect.Items[i], got[i], "at", "from", "to", "episode", "reason", "requested_delay_ms", "open_for_ms");
                        }
                        catch (CaseFailure f)
                        {
                            throw new CaseFailure("event " + i + ": " + f.Message);
                        }
                    }
                    return;
                }
                case "force_open":
                    BreakerFor(c, step.Str("key", null)).ForceOpen();
                    Check(expect, a);
                    return;
                case "disable":
                    BreakerFor(c, step.Str("key", null)).Disable();
                    Check(expect, a);
                    return;
                case "reset":
                    BreakerFor(c, step.Str("key", null)).Reset();
                    Check(expect, a);
                    return;
                case "clock_set":
                {
                    var to = step.U64("to_ms");
                    if (!to.HasValue) throw new CaseFailure("clock_set needs to_ms");
                    try
                    {
                        c.Clock.Set(TimeSpan.FromTicks((long)to.Value * TimeSpan.TicksPerMillisecond));
                    }
                    catch (Exception e) when (IsHoldoff(e))
                    {
                        a["error"] = ErrName(e);
                    }
                    Check(expect, a, "error");
                    return;
                }
                case "clock_advance":
                {
                    var by = step.U64("by_ms");
                    if (!by.HasValue) throw new CaseFailure("clock_advance needs by_ms");
                    // A jump past the C ABI's 2^64-1 ns (Advance refuses it) is made in parts: the
                    // clock saturates at the end of its axis (conformance/README.md).
                    var left = TimeSpan.FromTicks((long)Math.Min(by.Value, (ulong)(TimeSpan.MaxValue.Ticks / TimeSpan.TicksPerMillisecond)) * TimeSpan.TicksPerMillisecond);
                    var part = TimeSpan.FromDays(365 * 500);
                    for (; left > part; left -= part) c.Clock.Advance(part);
                    c.Clock.Advance(left);
                    Check(expect, a);
                    return;
                }
                case "decide":
                {
                    var o = OutcomeOf(step.Get("outcome"));
                    if (c.Budget == null) throw new CaseFailure("the case has no budget");
                    RetryState s;
                    if (!c.States.TryGetValue(callName, out s)) c.States[callName] = s = new RetryState();
                    Check(expect, DecisionObj(c.Budget.Decide(s, o)), "decision", "delay_ms", "source", "server_delay_ms", "capped", "reason");
                    return;
                }
                case "budget_state":
                {
                    if (c.Budget == null) throw new CaseFailure("the case has no budget");
                    var start = c.Budget.EpisodeStart;
                    a["episode_active"] = start.HasValue;
                    a["episode_start_ms"] = start.HasValue ? (object)(double)(start.Value.Ticks / TimeSpan.TicksPerMillisecond) : null;
                    RetryState s;
                    a["retries"] = c.States.TryGetValue(callName, out s) ? s.Retries : 0;
                    Check(expect, a, "episode_active", "episode_start_ms", "retries");
                    return;
                }
                case "parse_retry_after":
                {
                    string v = step.Str("value", null);
                    if (v == null) throw new CaseFailure("parse_retry_after needs value");
                    Hint(RetryAfter.Parse(v, c.Clock.WallNow), a);
                    Check(expect, a, "delay_ms", "unusable");
                    return;
                }
                case "hint":
                {
                    var h = RetryAfter.HintFromHeaders(Headers(step), c.Clock.WallNow);
                    Hint(h, a);
                    a["source"] = Names.Of(h.Source);
                    Check(expect, a, "delay_ms", "unusable", "source");
                    return;
                }
                case "classify":
                {
                    var status = step.I64("status");
                    if (!status.HasValue) throw new CaseFailure("classify needs an integer status");
                    try
                    {
                        var cl = c.Classifier.Classify(status.Value, Headers(step), c.Clock.WallNow);
                        a["outcome"] = Names.Of(cl.Outcome.Kind);
                        a["retry_later_ms"] = cl.Outcome.Kind == OutcomeKind.RetryLater ? Ms(cl.Outcome.Delay) : null;
                    }
                    catch (Exception e) when (IsHoldoff(e))
                    {
                        a["error"] = ErrName(e);
                    }
                    Check(expect, a, "outcome", "retry_later_ms", "error");
                    return;
                }
                case "quota_acquire":
                {
                    if (c.Quota == null) throw new CaseFailure("the case has no quota");
                    var l = c.Quota.Acquire(step.True("timeout"));
                    a["acquired"] = l.Acquired;
                    a["cost"] = l.Cost;
                    string name = step.Str("as", null);
                    if (name != null && l.Acquired) c.Leases[name] = l;
                    a["available"] = c.Quota.Available;
                    Check(expect, a, "acquired", "cost", "available");
                    return;
                }
                case "quota_success":
                {
                    if (c.Quota == null) throw new CaseFailure("the case has no quota");
                    QuotaLease lease = null;
                    string name = step.Str("lease", null);
                    // The lease stays named after it is given back: a second give-back must be refused.
                    if (name != null && !c.Leases.TryGetValue(name, out lease)) throw new CaseFailure("no lease named \"" + name + "\"");
                    try
                    {
                        if (step.True("foreign"))
                        {
                            if (lease == null) throw new CaseFailure("quota_success with foreign needs lease");
                            using (var other = c.Config.NewRetryQuota()) other.OnSuccess(lease);
                        }
                        else
                        {
                            if (lease != null) c.Quota.OnSuccess(lease);
                            else c.Quota.OnSuccess();
                        }
                    }
                    catch (Exception e) when (IsHoldoff(e))
                    {
                        a["error"] = ErrName(e);
                    }
                    a["available"] = c.Quota.Available;
                    Check(expect, a, "available", "error");
                    return;
                }
                case "group_snapshot":
                {
                    if (c.Group == null) throw new CaseFailure("the case has no group");
                    var s = c.Group.Snapshot();
                    a["keys"] = c.Group.Keys();
                    a["max_keys"] = s.MaxKeys;
                    a["evictions"] = s.Evictions;
                    a["overflows"] = s.Overflows;
                    Check(expect, a, "keys", "max_keys", "evictions", "overflows");
                    return;
                }
                case "before":
                {
                    if (c.Policy == null) throw new CaseFailure("the case has no policy");
                    var b = c.Policy.BeforeAttempt(CallOf(c, callName));
                    a["action"] = Names.Of(b.Action);
                    if (b.Action == BeforeAction.Go)
                    {
                        a["episode"] = b.Permit.Episode;
                        a["probe"] = b.Permit.IsProbe;
                        c.Permits[step.Str("as", "_last")] = new NamedPermit { Permit = b.Permit, Breaker = c.Policy.Breaker };
                    }
                    else if (b.Action == BeforeAction.Wait)
                    {
                        a["delay_ms"] = Ms(b.Delay);
                    }
                    else
                    {
                        a["reason"] = Names.Of(b.Reason.Value);
                        a["retry_after_ms"] = OptMs(b.RetryAfter);
                    }
                    Check(expect, a, "action", "episode", "probe", "delay_ms", "reason", "retry_after_ms");
                    return;
                }
                case "after":
                {
                    if (c.Policy == null) throw new CaseFailure("the case has no policy");
                    string name = step.Str("permit", "_last");
                    NamedPermit np;
                    if (!c.Permits.TryGetValue(name, out np)) throw new CaseFailure("no permit named \"" + name + "\"");
                    var call = CallOf(c, callName);
                    var status = step.I64("status");
                    try
                    {
                        if (status.HasValue)
                        {
                            Classification cl;
                            a = DecisionObj(c.Policy.AfterResponse(call, np.Permit, status.Value, Headers(step), out cl));
                            a["outcome"] = Names.Of(cl.Outcome.Kind);
                        }
                        else
                        {
                            a = DecisionObj(c.Policy.AfterAttempt(call, np.Permit, OutcomeOf(step.Get("outcome"))));
                        }
                    }
                    catch (Exception e) when (IsHoldoff(e))
                    {
                        a = new Dictionary<string, object> { { "error", ErrName(e) } };
                    }
                    Check(expect, a, "decision", "delay_ms", "source", "server_delay_ms", "capped", "reason", "error", "outcome");
                    return;
                }
                case "execute":
                    if (c.Policy == null) throw new CaseFailure("the case has no policy");
                    ExecuteStep.Run(c, step, expect);
                    return;
                case "metrics":
                    CheckSeries(Readings(c, step.Str("of", null)), expect);
                    return;
            }
            throw new CaseFailure("unknown op \"" + op + "\"");
        }

        /// <summary>The readings of the object a metrics step names (`of`), through the public API.</summary>
        static IReadOnlyList<MetricReading> Readings(Ctx c, string of)
        {
            switch (of)
            {
                case "breaker": return Need(c.Policy != null ? c.Policy.Breaker : c.Breaker, of).Metrics();
                case "policy": return Need(c.Policy, of).Metrics();
                case "quota": return Need(c.Policy != null ? c.Policy.Quota : c.Quota, of).Metrics();
                case "group": return Need(c.Group, of).Metrics();
            }
            throw new CaseFailure("metrics needs of: breaker, policy, quota or group, not " + (of ?? "nothing"));
        }

        static T Need<T>(T part, string what) where T : class
        {
            if (part == null) throw new CaseFailure("the case has no " + what);
            return part;
        }

        /// <summary>The non-zero readings, keyed by series, must be exactly expect.series (each
        /// value within 1e-9); expect has no other key.</summary>
        static void CheckSeries(IReadOnlyList<MetricReading> readings, JsonNode expect)
        {
            if (expect == null) return;
            if (expect.Kind != JsonKind.Object) throw new CaseFailure("expect must be an object");
            foreach (var f in expect.Fields)
                if (f.Key != "series") throw new CaseFailure("unknown expect key \"" + f.Key + "\"");
            var want = expect.Get("series");
            if (want == null) return;
            if (want.Kind != JsonKind.Object) throw new CaseFailure("series must be an object");
            var got = new SortedDictionary<string, double>(StringComparer.Ordinal);
            foreach (var r in readings)
                if (r.Value != 0) got.Add(r.Series, r.Value);
            var wanted = new SortedDictionary<string, double>(StringComparer.Ordinal);
            foreach (var f in want.Fields)
            {
                if (f.Value.Kind != JsonKind.Number) throw new CaseFailure("series " + f.Key + " must be a number");
                wanted[f.Key] = f.Value.Number;
            }
            var wrong = new List<string>();
            foreach (var kv in wanted)
            {
                double v;
                if (!got.TryGetValue(kv.Key, out v)) wrong.Add(kv.Key + ": expected " + Show(kv.Value) + ", got 0");
                else if (Math.Abs(v - kv.Value) > 1e-9) wrong.Add(kv.Key + ": expected " + Show(kv.Value) + ", got " + Show(v));
            }
            foreach (var kv in got)
                if (!wanted.ContainsKey(kv.Key)) wrong.Add(kv.Key + ": expected 0, got " + Show(kv.Value));
            if (wrong.Count > 0)
                throw new CaseFailure("series: " + string.Join("; ", wrong) + "  (all non-zero: {"
                    + string.Join(",", got.Select(kv => kv.Key + ":" + Show(kv.Value))) + "})");
        }

        /// <summary>The store name of the case's memory://name fleet url, or null.</summary>
        static string MemoryStore(JsonNode cs)
        {
            var config = cs.Get("config");
            var fleet = config != null ? config.Get("fleet") : null;
            string url = fleet != null ? fleet.Str("url", null) : null;
            return url != null && url.StartsWith("memory://", StringComparison.Ordinal) ? url.Substring(9) : null;
        }

        /// <summary>The case's `workers` (default 1), built from one configuration on one clock
        /// after a reset of its memory store (names are reused between runs of one process).
        /// On a failure the workers built so far are disposed.</summary>
        static List<Ctx> BuildWorkers(JsonNode cs)
        {
            ulong n = cs.U64("workers") ?? 1;
            string store = MemoryStore(cs);
            if (store != null) Fleet.MemoryStoreControl(store, MemoryStoreAction.Reset);
            var workers = new List<Ctx>();
            try
            {
                for (ulong i = 0; i < Math.Max(n, 1); i++) workers.Add(Build(cs, i == 0 ? null : workers[0]));
                return workers;
            }
            catch
            {
                DisposeWorkers(workers);
                throw;
            }
        }

        /// <summary>Later workers first: the first owns the shared clock and configuration.</summary>
        static void DisposeWorkers(List<Ctx> workers)
        {
            for (int i = workers.Count - 1; i >= 0; i--) workers[i].Dispose();
        }

        static readonly Dictionary<string, MemoryStoreAction> StoreActions = new Dictionary<string, MemoryStoreAction>
        {
            { "down", MemoryStoreAction.Down }, { "up", MemoryStoreAction.Up }, { "flush", MemoryStoreAction.Flush },
        };

        /// <summary>One worker's fleet tick, its report compared with <paramref name="expect"/>.</summary>
        static void FleetSyncStep(Ctx c, JsonNode expect)
        {
            if (c.Breaker == null) throw new CaseFailure("the case has no breaker");
            var r = c.Breaker.SyncFleet();
            var a = new Dictionary<string, object> { { "ok", r.Ok }, { "attached", r.Attached }, { "granted", r.Granted } };
            if (r.Ok && r.State.HasValue)
            {
                a["fleet_state"] = Names.Of(r.State.Value);
                a["fleet_episode"] = r.Episode.Value;
                a["fleet_recoveries"] = r.Recoveries.Value;
            }
            Check(expect, a, "ok", "attached", "granted", "fleet_state", "fleet_episode", "fleet_recoveries");
        }

        /// <summary>Runs a step on the worker it names (`worker`, default 0); a fleet_sync without
        /// one ticks every worker in order, and fleet_store acts on the case's memory store.</summary>
        static void CaseStep(JsonNode cs, List<Ctx> workers, JsonNode step)
        {
            var named = step.U64("worker");
            if (step.Get("worker") != null && (!named.HasValue || named.Value >= (ulong)workers.Count))
                throw new CaseFailure("no worker " + step.Get("worker").Raw + " (the case has " + workers.Count + ")");
            int i = (int)(named ?? 0);
            switch (step.Str("op", null))
            {
                case "fleet_store":
                    MemoryStoreAction action;
                    string store = MemoryStore(cs);
                    if (store == null || !StoreActions.TryGetValue(step.Str("action", ""), out action))
                        throw new CaseFailure("fleet_store needs a memory:// fleet and down, up or flush");
                    Fleet.MemoryStoreControl(store, action);
                    Check(step.Get("expect"), new Dictionary<string, object>());
                    return;
                case "fleet_sync":
                    int from = named.HasValue ? i : 0, to = named.HasValue ? i : workers.Count - 1;
                    for (int j = from; j <= to; j++)
                    {
                        try
                        {
                            FleetSyncStep(workers[j], step.Get("expect"));
                        }
                        catch (CaseFailure e)
                        {
                            throw new CaseFailure("worker " + j + ": " + e.Message);
                        }
                    }
                    return;
            }
            Step(workers[i], step);
        }

        static void RunCase(JsonNode cs, string flavour)
        {
            var expectError = cs.Get("expect_error");
            List<Ctx> workers;
            try
            {
                workers = BuildWorkers(cs);
                foreach (var w in workers) w.Flavour = flavour;
            }
            catch (Exception e)
            {
                if (e is CaseFailure) throw;
                if (expectError == null) throw new CaseFailure("configuration refused: " + e.Message);
                var a = new Dictionary<string, object> { { "error", ErrName(e) } };
                var ce = e as InvalidConfigException;
                if (ce != null) a["field"] = ce.ParamName;
                Check(expectError, a, "error", "field");
                return;
            }
            try
            {
                var clock = workers[0].Clock;
                if (expectError != null) throw new CaseFailure("expected configuration error " + expectError.Raw + ", but it built");
                var steps = cs.Get("steps");
                if (steps == null || steps.Kind != JsonKind.Array) throw new CaseFailure("case without steps");
                for (int i = 0; i < steps.Items.Count; i++)
                {
                    var step = steps.Items[i];
                    ulong repeat = step.U64("repeat") ?? 1, every = step.U64("every_ms") ?? 0;
                    var at = step.U64("at");
                    for (ulong r = 0; r < repeat; r++)
                    {
                        if (at.HasValue)
                        {
                            ulong t = at.Value + r * every;
                            try
                            {
                                clock.Set(TimeSpan.FromTicks((long)t * TimeSpan.TicksPerMillisecond));
                            }
                            catch (HoldoffException e)
                            {
                                throw new CaseFailure(string.Format("step {0}: clock cannot move to {1}: {2}", i, t, e.Message));
                            }
                        }
                        try
                        {
                            CaseStep(cs, workers, step);
                        }
                        catch (Exception e)
                        {
                            throw new CaseFailure(string.Format("step {0} {1} at {2}{3}: {4}", i, step.Str("op", "?"),
                                clock.Now.Ticks / TimeSpan.TicksPerMillisecond, repeat > 1 ? " (repetition " + r + ")" : "",
                                e is CaseFailure ? e.Message : e.GetType().Name + ": " + e.Message));
                        }
                    }
                }
            }
            finally
            {
                DisposeWorkers(workers);
            }
        }

        static int Main(string[] args)
        {
            if (args.Length != 1)
            {
                Console.Error.WriteLine("usage: Conformance.exe CONFORMANCE_DIR");
                return 2;
            }
            Library.EnsureCompatible();
            int version = int.Parse(File.ReadAllText(Path.Combine(args[0], "VERSION")).Trim(), CultureInfo.InvariantCulture);
            if (version != SuiteVersion)
            {
                Console.Error.WriteLine("runner written for suite version {0}, found {1}", SuiteVersion, version);
                return 2;
            }
            string filter = Environment.GetEnvironmentVariable("HOLDOFF_CASES") ?? "";
            var files = Directory.GetFiles(Path.Combine(args[0], "cases"), "*.json", SearchOption.AllDirectories)
                .OrderBy(f => f, StringComparer.Ordinal).ToList();
            int passed = 0, failed = 0;
            var ids = new HashSet<string>();
            foreach (var file in files)
            {
                var doc = Json.Parse(File.ReadAllText(file));
                foreach (var cs in doc.Get("cases").Items)
                {
                    string id = cs.Str("id", null);
                    if (id == null || !ids.Add(id)) throw new InvalidDataException(file + ": missing or duplicate case id " + id);
                    if (!id.Contains(filter)) continue;
                    foreach (var flavour in ExecuteStep.Flavours(cs))
                    {
                        string name = flavour != null ? id + " [" + flavour + "]" : id;
                        try
                        {
                            RunCase(cs, flavour);
                            passed++;
                            Console.WriteLine("ok   " + name);
                        }
                        catch (Exception e)
                        {
                            failed++;
                            Console.WriteLine("FAIL " + name + ": " + (e is CaseFailure ? e.Message : e.ToString()));
                        }
                    }
                }
            }
            // Strict: every handle must have been disposed, not left to a finalizer.
            ulong live = Library.LiveHandles;
            if (live != 0)
            {
                Console.WriteLine("FAIL leak check: {0} holdoff handles still alive after the suite", live);
                failed++;
            }
            Console.WriteLine("{0} passed, {1} failed, 0 skipped", passed, failed);
            return failed > 0 || passed == 0 ? 1 : 0;
        }
    }
}
