using System;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>What happened to a call, as the breaker and budget need to know it.</summary>
    public struct Outcome : IEquatable<Outcome>
    {
        /// <summary>Which outcome.</summary>
        public OutcomeKind Kind { get; }
        /// <summary>The upstream's delay of a retry-later; <see cref="TimeSpan.Zero"/> otherwise.</summary>
        public TimeSpan Delay { get; }

        Outcome(OutcomeKind kind, TimeSpan delay) : this() { Kind = kind; Delay = delay; }

        /// <summary>The call succeeded.</summary>
        public static readonly Outcome Success = new Outcome(OutcomeKind.Success, TimeSpan.Zero);
        /// <summary>Reachable but not retryable (a 404): proves the upstream reachable.</summary>
        public static readonly Outcome Answer = new Outcome(OutcomeKind.Answer, TimeSpan.Zero);
        /// <summary>A transient failure (a 500, a refused connection): counted by the trip policy.</summary>
        public static readonly Outcome Failure = new Outcome(OutcomeKind.Failure, TimeSpan.Zero);
        /// <summary>The call ran out of time: a failure for the breaker.</summary>
        public static readonly Outcome Timeout = new Outcome(OutcomeKind.Timeout, TimeSpan.Zero);
        /// <summary>The caller gave up on the call: moves nothing (a probe frees its slot).</summary>
        public static readonly Outcome Cancelled = new Outcome(OutcomeKind.Cancelled, TimeSpan.Zero);

        /// <summary>The upstream asked to be left alone for <paramref name="delay"/>.</summary>
        public static Outcome RetryLater(TimeSpan delay) { return new Outcome(OutcomeKind.RetryLater, delay); }

        internal ulong DelayNs() { return Kind == OutcomeKind.RetryLater ? Units.Ns(Delay, "delay") : 0; }

        /// <summary>Same kind and delay.</summary>
        public bool Equals(Outcome o) { return Kind == o.Kind && Delay == o.Delay; }
        public override bool Equals(object o) { return o is Outcome && Equals((Outcome)o); }
        public override int GetHashCode() { return Kind.GetHashCode() ^ Delay.GetHashCode(); }
        public static bool operator ==(Outcome a, Outcome b) { return a.Equals(b); }
        public static bool operator !=(Outcome a, Outcome b) { return !a.Equals(b); }
        /// <summary>The kind's stable name.</summary>
        public override string ToString() { return Names.Of(Kind); }

        /// <summary>An outcome as the C library reports it (a code, and a retry-later's delay).</summary>
        internal static Outcome FromC(uint kind, ulong retryLaterNs)
        {
            switch ((OutcomeKind)kind)
            {
                case OutcomeKind.Success: return Success;
                case OutcomeKind.Answer: return Answer;
                case OutcomeKind.Timeout: return Timeout;
                case OutcomeKind.RetryLater: return RetryLater(Units.Span(retryLaterNs));
                case OutcomeKind.Cancelled: return Cancelled;
                default: return Failure;
            }
        }

        /// <summary>The default classification of an exception thrown by an attempt; null means a
        /// programming error. HttpRequestException, SocketException, IOException and WebException
        /// are a failure (a WebException whose Status is Timeout is a timeout); TimeoutException
        /// and OperationCanceledException (TaskCanceledException included) a timeout: the
        /// caller's own cancellation never reaches a classifier; <see cref="RetryLaterException"/>
        /// a retry-later with its delay. An AggregateException holding one exception is that
        /// exception. Anything else (NullReferenceException, ArgumentException,
        /// InvalidOperationException, ...) is null. ArgumentNullException for a null
        /// <paramref name="error"/>.</summary>
        public static Outcome? Classify(Exception error)
        {
            if (error == null) throw new ArgumentNullException("error");
            var e = Errors.Unwrap(error);
            var later = e as RetryLaterException;
            if (later != null) return RetryLater(later.Delay);
            var web = e as WebException;
            if (web != null) return web.Status == WebExceptionStatus.Timeout ? Timeout : Failure;
            if (e is HttpRequestException || e is SocketException || e is IOException) return Failure;
            if (e is TimeoutException || e is OperationCanceledException) return Timeout;
            return null;
        }
    }
}
