// HttpClient through a Policy: a DelegatingHandler that sends each request through the retry
// helpers' async loop, with responses classified by the core from their status and headers.
using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>Sends every request through <see cref="Policy"/>, as
    /// <see cref="Policy.ExecuteAsync{T}"/> does, with its options (timeouts, hooks, classifier of
    /// exceptions, sleeper):
    /// <code>var client = new HttpClient(new HoldoffHandler(policy, new HttpClientHandler()));</code>
    ///
    /// Each response is classified by the policy's classifier from its status and headers: a 429
    /// or 503 with a usable Retry-After (or retry-after-ms, RateLimit, X-RateLimit-Reset, ...)
    /// waits exactly the server's delay up to the budget's cap, other failures (500, 502, 408, a
    /// broken status) follow the backoff. The client gets the last response when it is a success
    /// or a final answer (a 404 is returned, not thrown); <see cref="GiveUpException"/> with the
    /// last response as <see cref="UpstreamUnavailableException.LastResult"/> (500s until the
    /// end) or the last transport exception (HttpRequestException) as its InnerException;
    /// <see cref="BreakerOpenException"/> when the breaker refuses; OperationCanceledException when
    /// the request's token is cancelled. Responses followed by a retry are disposed.
    ///
    /// A request is re-sent as is: one with content other than ByteArrayContent (StringContent,
    /// FormUrlEncodedContent) is sent once, and a retry the policy would make gives up with
    /// <see cref="GiveUpReason.AttemptsExhausted"/> and that attempt's response or exception.
    ///
    /// HttpClient.Timeout cancels the request's token, which the handler cannot tell from the
    /// caller's cancellation: leave it above the policy's <see cref="Policy.TotalTimeout"/> (the
    /// defaults, 100 s and 60 s, are) or set it to Timeout.InfiniteTimeSpan.</summary>
    public sealed class HoldoffHandler : DelegatingHandler
    {
        /// <summary>The policy every request goes through.</summary>
        public Policy Policy { get; }

        /// <summary>ArgumentNullException for a null <paramref name="policy"/>; set InnerHandler
        /// before the first request.</summary>
        public HoldoffHandler(Policy policy)
        {
            if (policy == null) throw new ArgumentNullException("policy");
            Policy = policy;
        }

        /// <summary>ArgumentNullException for a null <paramref name="policy"/> or
        /// <paramref name="innerHandler"/>.</summary>
        public HoldoffHandler(Policy policy, HttpMessageHandler innerHandler) : base(innerHandler)
        {
            if (policy == null) throw new ArgumentNullException("policy");
            Policy = policy;
        }

        protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage request, CancellationToken cancellationToken)
        {
            if (request == null) throw new ArgumentNullException("request");
            bool resendable = request.Content == null || request.Content is ByteArrayContent;
            return Policy.LoopAsync(tok => Send(request, tok), Report, Release, () => resendable, cancellationToken);
        }

        Task<HttpResponseMessage> Send(HttpRequestMessage request, CancellationToken ct)
        {
            return base.SendAsync(request, ct);
        }

        static StepC Report(Execution exec, HttpResponseMessage response)
        {
            if (response == null) throw new InvalidOperationException("holdoff: the inner handler returned no response");
            return exec.CompleteResponse((long)response.StatusCode, Headers(response));
        }

        static void Release(HttpResponseMessage response)
        {
            if (response != null) response.Dispose();
        }

        /// <summary>Every field value of the response and its content, one pair each.</summary>
        static List<KeyValuePair<string, string>> Headers(HttpResponseMessage response)
        {
            var hs = new List<KeyValuePair<string, string>>();
            foreach (var h in response.Headers)
                foreach (var v in h.Value) hs.Add(new KeyValuePair<string, string>(h.Key, v));
            if (response.Content != null)
                foreach (var h in response.Content.Headers)
                    foreach (var v in h.Value) hs.Add(new KeyValuePair<string, string>(h.Key, v));
            return hs;
        }
    }
}
