// API tests of HoldoffHandler: HttpClient through a policy, in front of a stub handler that
// answers from a list, on the manual clock.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        /// <summary>Content that remembers being disposed (with its response).</summary>
        sealed class TrackedContent : ByteArrayContent
        {
            public bool Disposed;
            public TrackedContent() : base(new byte[0]) { }
            protected override void Dispose(bool disposing)
            {
                Disposed = true;
                base.Dispose(disposing);
            }
        }

        /// <summary>The upstream: each request gets the next answer (a status, or an exception).</summary>
        sealed class Stub : HttpMessageHandler
        {
            readonly object[] answers;
            public readonly List<HttpResponseMessage> Sent = new List<HttpResponseMessage>();
            public readonly List<CancellationToken> Tokens = new List<CancellationToken>();
            public int Requests;

            public Stub(params object[] answers) { this.answers = answers; }

            protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken ct)
            {
                Tokens.Add(ct);
                var a = answers[Math.Min(Requests++, answers.Length - 1)];
                var e = a as Exception;
                if (e != null) throw e;
                var spec = a as string;
                var r = new HttpResponseMessage((HttpStatusCode)(spec != null ? int.Parse(spec.Split(' ')[0]) : (int)a))
                {
                    Content = new TrackedContent(),
                    RequestMessage = request,
                };
                if (spec != null) r.Headers.TryAddWithoutValidation("Retry-After", spec.Split(' ')[1]);
                Sent.Add(r);
                return Task.FromResult(r);
            }
        }

        static HttpClient Client(Policy p, Stub stub)
        {
            return new HttpClient(new HoldoffHandler(p, stub)) { Timeout = Timeout.InfiniteTimeSpan };
        }

        static void HandlerHelpers()
        {
            var waits = new List<RetryWait>();
            var attempts = new List<AttemptResult>();
            using (var clock = new ManualClock())
            {
                // A fresh policy per scenario: a 503's Retry-After opens the breaker for every caller.
                Policy p = null;
                Func<Policy> fresh = () =>
                {
                    if (p != null) p.Dispose();
                    waits.Clear();
                    attempts.Clear();
                    return p = HookedPolicy(clock, Retries(2), waits, attempts);
                };
                fresh();
                var stub = new Stub("503 2", 200);
                HttpResponseMessage r;
                using (var client = Client(p, stub))
                    r = Await(client.GetAsync("http://upstream.invalid/"));
                Check(stub.Requests == 2 && ReferenceEquals(r, stub.Sent[1]) && r.StatusCode == HttpStatusCode.OK, "a 503 with Retry-After, then the 200 returned");
                Check(waits.Count == 1 && waits[0].Delay == TimeSpan.FromSeconds(2) && waits[0].Source == WaitSource.RetryAfter
                    && ReferenceEquals(waits[0].LastResult, stub.Sent[0]) && clock.Now == TimeSpan.FromSeconds(2), "the server's Retry-After was waited");
                Check(((TrackedContent)stub.Sent[0].Content).Disposed && !((TrackedContent)r.Content).Disposed,
                    "the retried response was disposed, the returned one was not");
                Check(stub.Tokens.Count == 2 && stub.Tokens[0] != stub.Tokens[1] && stub.Tokens[0].IsCancellationRequested == false,
                    "each attempt had its own token");

                stub = new Stub(404);
                fresh();
                using (var client = Client(p, stub))
                    r = Await(client.GetAsync("http://upstream.invalid/"));
                Check(r.StatusCode == HttpStatusCode.NotFound && stub.Requests == 1 && attempts.Count == 1 && attempts[0].Outcome == Outcome.Answer,
                    "a final 404 is returned, not thrown, not retried");

                stub = new Stub(500);
                fresh();
                using (var client = Client(p, stub))
                {
                    var gu = Throws<GiveUpException>(() => Await(client.GetAsync("http://upstream.invalid/")), "500s until the end");
                    Check(gu != null && gu.Reason == GiveUpReason.AttemptsExhausted && gu.Attempts == 3 && stub.Requests == 3
                        && ReferenceEquals(gu.LastResult, stub.Sent[2]) && gu.InnerException == null
                        && !((TrackedContent)stub.Sent[2].Content).Disposed && ((TrackedContent)stub.Sent[1].Content).Disposed,
                        "500s until the end: give-up with the last response attached, undisposed");
                }

                var refused = new HttpRequestException("connection refused");
                stub = new Stub(refused, 200);
                fresh();
                using (var client = Client(p, stub))
                    Check(Await(client.GetAsync("http://upstream.invalid/")).StatusCode == HttpStatusCode.OK && stub.Requests == 2,
                        "a transport error is retried");

                stub = new Stub(503, 200);
                fresh();
                using (var client = Client(p, stub))
                    Check(Await(client.PostAsync("http://upstream.invalid/", new StringContent("{}"))).StatusCode == HttpStatusCode.OK
                        && stub.Requests == 2, "StringContent is sent again");

                stub = new Stub(503, 200);
                fresh();
                using (var client = Client(p, stub))
                {
                    var body = new StreamContent(new MemoryStream(new byte[] { 1, 2, 3 }));
                    var gu = Throws<GiveUpException>(() => Await(client.PostAsync("http://upstream.invalid/", body)), "a stream sent once");
                    Check(gu != null && stub.Requests == 1 && gu.Reason == GiveUpReason.AttemptsExhausted && gu.Attempts == 1
                        && gu.RetryAfter == TimeSpan.FromMilliseconds(500) && ReferenceEquals(gu.LastResult, stub.Sent[0]) && waits.Count == 0,
                        "content that cannot be sent twice: one attempt, then the give-up with the wait it would have made");
                }

                stub = new Stub(new NullReferenceException("a bug in a handler"));
                fresh();
                using (var client = Client(p, stub))
                    Throws<NullReferenceException>(() => Await(client.GetAsync("http://upstream.invalid/")), "a handler's bug");
                Check(stub.Requests == 1 && attempts.Count == 1 && attempts[0].Outcome == Outcome.Cancelled, "a handler's bug is rethrown at once");
                p.Dispose();
            }

            // The request's token cancelled during a 20 s wait (the real sleeper), at once.
            using (var clock = new ManualClock())
            using (var p = new Policy(new PolicyOptions(), clock))
            using (var caller = new CancellationTokenSource())
            using (var waiting = new ManualResetEventSlim())
            {
                p.OnRetry = w => waiting.Set();
                var stub = new Stub("503 20");
                using (var client = Client(p, stub))
                {
                    var call = client.GetAsync("http://upstream.invalid/", caller.Token);
                    Check(waiting.Wait(Watchdog) && !call.IsCompleted, "waiting out the 503's Retry-After");
                    caller.Cancel();
                    Throws<OperationCanceledException>(() => Await(call), "the request's cancellation during the wait");
                    Check(stub.Requests == 1, "no request after the cancellation");
                }
            }
        }
    }
}
