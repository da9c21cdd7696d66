// The `execute` op of the conformance contract (conformance/README.md, "Execute"): one logical
// call through a real public retry helper of C#, once per flavour: `async`
// (Policy.ExecuteAsync), `sync` (Policy.Execute) and `async http` (HttpClient with a
// HoldoffHandler in front of a stub handler that answers the script). The operation follows the
// script and moves the manual clock itself; the injected sleeper moves it for waits; the hooks
// record the attempts and the waits.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    /// <summary>The runner's own error type, which its classifier calls an answer.</summary>
    sealed class RunnerAnswer : Exception
    {
        public RunnerAnswer() : base("an answer of the runner's own type") { }
    }

    /// <summary>A value an attempt returned (distinct per attempt: results compare by reference).</summary>
    sealed class Value
    {
        public readonly int Attempt;
        public Value(int attempt) { Attempt = attempt; }
    }

    sealed class ExecuteStep
    {
        public const string Async = "async", Sync = "sync", AsyncHttp = "async http";

        /// <summary>Only turns a deadlock into a failure: no case waits on the wall clock.</summary>
        static readonly TimeSpan Watchdog = TimeSpan.FromSeconds(30);

        static readonly string[] ItemKeys = { "takes_ms", "returns", "response", "raises", "hits_deadline", "cancelled" };

        /// <summary>The flavours a case runs in: none (null) without an `execute` step; a script with
        /// a `returns` item runs in the plain flavours, one with a `response` item in the HTTP
        /// flavour, any other in all three.</summary>
        public static IEnumerable<string> Flavours(JsonNode cs)
        {
            var steps = cs.Get("steps");
            var items = steps == null || steps.Kind != JsonKind.Array ? new List<JsonNode>() : steps.Items
                .Where(s => s.Str("op", "") == "execute" && s.Get("script") != null && s.Get("script").Kind == JsonKind.Array)
                .SelectMany(s => s.Get("script").Items).ToList();
            bool execute = steps != null && steps.Kind == JsonKind.Array && steps.Items.Any(s => s.Str("op", "") == "execute");
            if (!execute) return new string[] { null };
            if (items.Any(i => i.Get("returns") != null)) return new[] { Async, Sync };
            if (items.Any(i => i.Get("response") != null)) return new[] { AsyncHttp };
            return new[] { Async, Sync, AsyncHttp };
        }

        readonly Ctx c;
        readonly List<JsonNode> script;
        readonly ulong? cancelInWait;
        readonly CancellationTokenSource caller = new CancellationTokenSource();
        readonly List<Dictionary<string, object>> attempts = new List<Dictionary<string, object>>();
        readonly List<Dictionary<string, object>> waits = new List<Dictionary<string, object>>();
        // Per attempt, in order: when it started, what the runner threw or returned, what the
        // after-attempt hook was shown.
        readonly List<double> starts = new List<double>();
        readonly List<object> thrown = new List<object>(), values = new List<object>();
        readonly List<Exception> hookErrors = new List<Exception>();
        readonly List<bool> deadlines = new List<bool>();
        TaskCompletionSource<bool> hanging = new TaskCompletionSource<bool>();
        TimeSpan attemptStart;
        bool nextIsWait;
        string rigFailure;

        ExecuteStep(Ctx c, JsonNode step)
        {
            this.c = c;
            var s = step.Get("script");
            if (s == null || s.Kind != JsonKind.Array) throw new CaseFailure("execute needs a script");
            script = s.Items;
            foreach (var item in script)
                foreach (var f in item.Fields)
                    if (Array.IndexOf(ItemKeys, f.Key) < 0) throw new CaseFailure("unknown script key \"" + f.Key + "\"");
            cancelInWait = step.U64("cancel_in_wait");
        }

        public static void Run(Ctx c, JsonNode step, JsonNode expect)
        {
            var x = new ExecuteStep(c, step);
            var got = x.Call();
            if (x.rigFailure != null) throw new CaseFailure(x.rigFailure);
            x.CheckAll(expect, got);
        }

        // ---- the injected sleeper and hooks -------------------------------------------------

        /// <summary>A wait (announced by OnRetry) moves the manual clock by its delay, or cancels
        /// the call for the wait numbered cancel_in_wait. Any other call times an attempt: it
        /// ends when the attempt hangs, which the attempt does once it has moved the clock by
        /// its `takes_ms`, its time limit.</summary>
        Task Sleep(TimeSpan d, CancellationToken tok)
        {
            if (nextIsWait)
            {
                nextIsWait = false;
                if (cancelInWait.HasValue && (ulong)waits.Count == cancelInWait.Value)
                {
                    caller.Cancel();
                    tok.ThrowIfCancellationRequested();
                    rigFailure = "the sleeper's token is not the caller's";
                }
                c.Clock.Advance(d);
                return Task.FromResult(true);
            }
            var fired = new TaskCompletionSource<bool>();
            tok.Register(() => fired.TrySetCanceled());
            hanging.Task.ContinueWith(t =>
            {
                var took = c.Clock.Now - attemptStart;
                if (took != d) rigFailure = string.Format("attempt {0} hangs after {1} ms, but its time limit is {2} ms", starts.Count, took.TotalMilliseconds, d.TotalMilliseconds);
                fired.TrySetResult(true);
            }, TaskContinuationOptions.ExecuteSynchronously);
            return fired.Task;
        }

        void OnRetry(RetryWait w)
        {
            nextIsWait = true;
            waits.Add(new Dictionary<string, object>
            {
                { "delay_ms", Conformance.Ms(w.Delay) }, { "source", Names.Of(w.Source) }, { "capped", w.Capped },
                { "server_delay_ms", Conformance.OptMs(w.ServerDelay) },
            });
        }

        void OnAttempt(AttemptResult a)
        {
            if (a.Number != attempts.Count + 1 || a.Number > starts.Count)
                rigFailure = string.Format("the hook saw attempt {0} after {1} attempts and {2} operations", a.Number, attempts.Count, starts.Count);
            attempts.Add(new Dictionary<string, object>
            {
                { "at", a.Number <= starts.Count ? (object)starts[a.Number - 1] : null }, { "probe", a.IsProbe },
                { "outcome", Names.Of(a.Outcome.Kind) },
            });
            hookErrors.Add(a.Error);
            // The async flavours leave the attempt behind (a TimeoutException of the helper's);
            // the sync one cannot stop it: the attempt throws the cancellation of its own token.
            bool cut = a.Error is TimeoutException || (c.Flavour == Sync && a.Error is OperationCanceledException
                && ((OperationCanceledException)a.Error).CancellationToken != caller.Token);
            if (a.Number <= deadlines.Count && deadlines[a.Number - 1] && !cut)
                rigFailure = string.Format("attempt {0} ran into its deadline, but the hook shows {1}", a.Number, a.Error);
            hanging = new TaskCompletionSource<bool>();
        }

        // ---- the operation ------------------------------------------------------------------

        /// <summary>Starts the next attempt of the script: records when, moves the clock by
        /// takes_ms.</summary>
        JsonNode Begin()
        {
            int i = starts.Count;
            if (i >= script.Count)
            {
                rigFailure = string.Format("attempt {0} is not in the script", i + 1);
                throw new CaseFailure(rigFailure);
            }
            var item = script[i];
            attemptStart = c.Clock.Now;
            starts.Add(attemptStart.Ticks / TimeSpan.TicksPerMillisecond);
            thrown.Add(null);
            values.Add(null);
            deadlines.Add(item.True("hits_deadline"));
            c.Clock.Advance(TimeSpan.FromMilliseconds(item.U64("takes_ms") ?? 0));
            return item;
        }

        /// <summary>Does what the item says, once its time is taken: returns a value or a
        /// response, or throws.</summary>
        object Act(JsonNode item, CancellationToken tok, bool http)
        {
            int i = starts.Count - 1;
            if (item.Get("returns") != null) return values[i] = new Value(i + 1);
            var response = item.Get("response");
            if (response != null)
            {
                var status = response.I64("status");
                if (!status.HasValue) throw Threw(i, new CaseFailure("a response needs an integer status"));
                HttpResponseMessage r;
                try
                {
                    r = new HttpResponseMessage((HttpStatusCode)status.Value);
                }
                catch (ArgumentOutOfRangeException e)
                {
                    // HttpResponseMessage refuses a value that is not a status, as the core does.
                    throw Threw(i, e);
                }
                foreach (var h in Conformance.Headers(response))
                {
                    if (r.Headers.TryAddWithoutValidation(h.Key, h.Value)) continue;
                    if (r.Content == null) r.Content = new ByteArrayContent(new byte[0]);
                    r.Content.Headers.TryAddWithoutValidation(h.Key, h.Value);
                }
                return values[i] = r;
            }
            if (item.True("cancelled"))
            {
                caller.Cancel();
                throw Threw(i, new OperationCanceledException(tok));
            }
            var raises = item.Get("raises");
            if (raises == null) throw Threw(i, new CaseFailure("an attempt returns, responds, raises, hangs or is cancelled"));
            if (raises.Kind == JsonKind.Object)
            {
                var ms = raises.U64("retry_later_ms");
                if (!ms.HasValue) throw Threw(i, new CaseFailure("bad raise " + raises.Raw));
                throw Threw(i, new RetryLaterException(TimeSpan.FromMilliseconds(ms.Value)));
            }
            switch (raises.String)
            {
                case "transport":
                    var refused = new SocketException((int)SocketError.ConnectionRefused);
                    throw Threw(i, http ? new HttpRequestException("connection refused", refused) : (Exception)refused);
                case "timeout":
                    throw Threw(i, http ? new TaskCanceledException("the client's timeout") : (Exception)new TimeoutException());
                case "answer":
                    throw Threw(i, new RunnerAnswer());
                case "bug":
                    throw Threw(i, new NullReferenceException("a programming error"));
            }
            throw Threw(i, new CaseFailure("unknown raise " + raises.Raw));
        }

        Exception Threw(int i, Exception e)
        {
            thrown[i] = e;
            return e;
        }

        async Task<object> AsyncOperation(CancellationToken tok, bool http)
        {
            var item = Begin();
            if (item.True("hits_deadline"))
            {
                hanging.TrySetResult(true);
                await Task.Delay(Watchdog, tok).ConfigureAwait(false);
                rigFailure = "a hanging attempt was never cut by its time limit";
                throw new CaseFailure(rigFailure);
            }
            return Act(item, tok, http);
        }

        object SyncOperation(CancellationToken tok)
        {
            var item = Begin();
            if (item.True("hits_deadline"))
            {
                hanging.TrySetResult(true);
                tok.WaitHandle.WaitOne(Watchdog);
                if (tok.IsCancellationRequested) throw Threw(starts.Count - 1, new OperationCanceledException(tok));
                rigFailure = "a hanging attempt was never cut by its time limit";
                throw new CaseFailure(rigFailure);
            }
            return Act(item, tok, false);
        }

        /// <summary>The inner handler of the HTTP flavour: each request is the next attempt.</summary>
        sealed class Upstream : HttpMessageHandler
        {
            readonly ExecuteStep x;
            public Upstream(ExecuteStep x) { this.x = x; }

            protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken tok)
            {
                return (HttpResponseMessage)await x.AsyncOperation(tok, true).ConfigureAwait(false);
            }
        }

        // ---- the call -----------------------------------------------------------------------

        /// <summary>What the caller got: a value or an exception.</summary>
        sealed class Got
        {
            public object Value;
            public Exception Error;
        }

        Got Call()
        {
            var p = c.Policy;
            p.Sleeper = Sleep;
            p.OnRetry = OnRetry;
            p.OnAttempt = OnAttempt;
            bool answers = script.Any(i => i.Get("raises") != null && i.Get("raises").Kind == JsonKind.String && i.Get("raises").String == "answer");
            p.ClassifyError = answers ? (Func<Exception, Outcome?>)(e => e is RunnerAnswer ? Outcome.Answer : Outcome.Classify(e)) : null;
            bool valued = script.Any(i => i.Get("returns") != null && !(i.Get("returns").Kind == JsonKind.String && i.Get("returns").String == "success"));
            Func<object, Outcome> classifyResult = null;
            if (valued) classifyResult = v => Conformance.OutcomeOf(script[((Value)v).Attempt - 1].Get("returns"));
            var got = new Got();
            try
            {
                switch (c.Flavour)
                {
                    case Async:
                        got.Value = Wait(p.ExecuteAsync(tok => AsyncOperation(tok, false), caller.Token, classifyResult));
                        break;
                    case Sync:
                        got.Value = p.Execute(SyncOperation, caller.Token, classifyResult);
                        break;
                    case AsyncHttp:
                        using (var client = new HttpClient(new HoldoffHandler(p, new Upstream(this))) { Timeout = Timeout.InfiniteTimeSpan })
                            got.Value = Wait(client.SendAsync(new HttpRequestMessage(HttpMethod.Get, "http://upstream.invalid/"), caller.Token));
                        break;
                    default:
                        throw new CaseFailure("unknown flavour " + c.Flavour);
                }
            }
            catch (CaseFailure)
            {
                throw;
            }
            catch (Exception e)
            {
                got.Error = e;
            }
            return got;
        }

        static T Wait<T>(Task<T> t)
        {
            bool ended;
            try
            {
                ended = t.Wait(Watchdog);
            }
            catch (AggregateException)
            {
                ended = true;
            }
            if (!ended) throw new CaseFailure("the call did not end (deadlock)");
            return t.GetAwaiter().GetResult();
        }

        // ---- what the caller saw, against `expect` ------------------------------------------

        int? AttemptOf(object o)
        {
            if (o == null) return null;
            for (int i = 0; i < starts.Count; i++)
                if (ReferenceEquals(o, thrown[i]) || ReferenceEquals(o, values[i]) || (i < hookErrors.Count && ReferenceEquals(o, hookErrors[i])))
                    return i + 1;
            return null;
        }

        Dictionary<string, object> Result(Got got)
        {
            var r = new Dictionary<string, object>();
            if (got.Error == null)
            {
                r["returns"] = (object)AttemptOf(got.Value) ?? "a value of no attempt";
                return r;
            }
            var e = got.Error;
            var u = e as UpstreamUnavailableException;
            if (u != null)
            {
                var open = u as BreakerOpenException;
                r["raises"] = open != null ? "breaker_open" : u is GiveUpException ? "give_up" : "unknown " + u.GetType().Name;
                r["attempts"] = u.Attempts;
                r["retry_after_ms"] = Conformance.OptMs(u.RetryAfter);
                object attached = u.InnerException ?? u.LastResult;
                r["cause"] = attached == null ? null : (object)AttemptOf(attached) ?? "an object of no attempt";
                if (open != null)
                {
                    if (u.Reason != GiveUpReason.BreakerOpen || open.State.HasValue) r["raises"] = "breaker_open with reason " + u.Reason;
                    return r;
                }
                r["reason"] = Names.Of(u.Reason);
                r["server_delay_ms"] = Conformance.OptMs(u.ServerDelay);
                r["capped"] = u.Capped;
                return r;
            }
            var input = e as InvalidInputException;
            if (input != null || (e is ArgumentOutOfRangeException && AttemptOf(e).HasValue && c.Flavour == AsyncHttp))
            {
                // The handler's status check (ParamName status), or HttpResponseMessage refusing a
                // value that is not a status before the handler could see it.
                r["raises"] = input == null || input.ParamName == "status" ? "invalid_input" : "invalid_input naming " + input.ParamName;
                r["attempts"] = attempts.Count;
                return r;
            }
            if (e is OperationCanceledException && AttemptOf(e) == null)
            {
                var oce = (OperationCanceledException)e;
                bool own = c.Flavour == AsyncHttp || oce.CancellationToken == caller.Token;
                r["raises"] = own ? "cancelled" : "a cancellation of another token";
                r["attempts"] = attempts.Count;
                return r;
            }
            var attempt = AttemptOf(e);
            if (attempt.HasValue)
            {
                r["raises"] = "original";
                r["attempt"] = attempt.Value;
                return r;
            }
            r["raises"] = "unexpected " + e;
            return r;
        }

        static readonly string[] AttemptKeys = { "at", "probe", "outcome" };
        static readonly string[] WaitKeys = { "delay_ms", "source", "capped", "server_delay_ms" };
        static readonly string[] ResultKeys = { "returns", "raises", "reason", "attempts", "attempt", "retry_after_ms", "server_delay_ms", "capped", "cause" };

        void CheckAll(JsonNode expect, Got got)
        {
            if (expect == null) return;
            if (expect.Kind != JsonKind.Object) throw new CaseFailure("expect must be an object");
            foreach (var f in expect.Fields)
            {
                switch (f.Key)
                {
                    case "result":
                        try
                        {
                            Conformance.Check(f.Value, Result(got), ResultKeys);
                        }
                        catch (CaseFailure e)
                        {
                            throw new CaseFailure("result: " + e.Message + (got.Error != null ? "  [" + got.Error.GetType().Name + ": " + got.Error.Message + "]" : ""));
                        }
                        break;
                    case "attempts":
                        List(f.Key, f.Value, attempts, AttemptKeys);
                        break;
                    case "waits":
                        List(f.Key, f.Value, waits, WaitKeys);
                        break;
                    default:
                        throw new CaseFailure("unknown expect key \"" + f.Key + "\"");
                }
            }
        }

        static void List(string key, JsonNode want, List<Dictionary<string, object>> got, string[] known)
        {
            if (want.Kind != JsonKind.Array) throw new CaseFailure(key + " must be an array");
            if (want.Items.Count != got.Count)
                throw new CaseFailure(string.Format("{0}: expected {1}, got {2}: [{3}]", key, want.Items.Count, got.Count,
                    string.Join(", ", got.Select(g => "{" + string.Join(",", g.Select(kv => kv.Key + ":" + Conformance.Show(kv.Value))) + "}"))));
            for (int i = 0; i < got.Count; i++)
            {
                try
                {
                    Conformance.Check(want.Items[i], got[i], known);
                }
                catch (CaseFailure e)
                {
                    throw new CaseFailure(key + "[" + i + "]: " + e.Message);
                }
            }
        }
    }
}
