using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>One upstream's breaker, retry budget, optional quota and classifier, shared by
    /// every call to it. Drive a call step by step with <see cref="BeforeAttempt"/> and
    /// <see cref="AfterAttempt"/> (or <see cref="AfterResponse"/>), or let the retry helpers
    /// (<see cref="ExecuteAsync(Func{CancellationToken, Task}, CancellationToken)"/>, Execute,
    /// <see cref="HoldoffHandler"/>; Policy.Execute.cs) run the whole loop. Thread-safe.</summary>
    public sealed partial class Policy : IDisposable
    {
        internal readonly PolicyHandle Handle;
        readonly List<IDisposable> owned = new List<IDisposable>();

        /// <summary>The policy's breaker (snapshots, events).</summary>
        public Breaker Breaker { get; }

        /// <summary>The policy's quota, or null without one (the caller's part for
        /// <see cref="Compose"/>, the policy's own when built from options).</summary>
        public RetryQuota Quota { get; }

        /// <summary>The policy's retry series (<see cref="MetricTable.All"/>, docs/metrics.md),
        /// zeros included: attempts, retries, waits and their total duration in seconds by source,
        /// capped waits, give-ups by reason, counted from the first read (which starts the
        /// counting). Only the retry series: read <see cref="Breaker"/>'s and
        /// <see cref="Quota"/>'s from them. ObjectDisposedException after Dispose.</summary>
        public IReadOnlyList<MetricReading> Metrics()
        {
            MetricListHandle list;
            Status.Check(Native.holdoff_policy_metrics(Handle, out list));
            return MetricReading.Read(list);
        }

        /// <summary>Ticks the fleet of the policy's breaker (<see cref="Holdoff.Breaker.SyncFleet"/>).</summary>
        public FleetSync SyncFleet() { return Breaker.SyncFleet(); }

        Policy(Breaker breaker, RetryBudget budget, RetryQuota quota, Classifier classifier)
        {
            Breaker = breaker;
            Quota = quota;
            Handle = New(breaker, budget, quota, classifier);
        }

        static PolicyHandle New(Breaker breaker, RetryBudget budget, RetryQuota quota, Classifier classifier)
        {
            PolicyHandle h;
            uint st;
            breaker.Acquire();
            try
            {
                st = Native.holdoff_policy_new(breaker.Raw, budget.Handle,
                    quota != null ? quota.Handle : new RetryQuotaHandle(),
                    classifier != null ? classifier.Handle : new ClassifierHandle(), out h);
            }
            finally
            {
                breaker.Leave();
            }
            Status.Check(st);
            return h;
        }

        /// <summary>Composes existing parts (<paramref name="quota"/> and
        /// <paramref name="classifier"/> may be null: no quota, the default classifier); the
        /// breaker and the budget must read the same clock (InvalidConfigException, field
        /// policy.clock). Disposing the policy leaves the parts to their owner.
        /// ArgumentNullException for a null <paramref name="breaker"/> or
        /// <paramref name="budget"/>.</summary>
        public static Policy Compose(Breaker breaker, RetryBudget budget, RetryQuota quota, Classifier classifier)
        {
            if (breaker == null) throw new ArgumentNullException(nameof(breaker));
            if (budget == null) throw new ArgumentNullException(nameof(budget));
            return new Policy(breaker, budget, quota, classifier);
        }

        /// <summary>Builds a policy and its parts reading one <paramref name="clock"/> (the system
        /// clock when null); disposing the policy disposes them. Throws InvalidConfigException (an
        /// ArgumentException) naming the invalid property and field; ArgumentNullException for a
        /// null <paramref name="options"/>.</summary>
        public Policy(PolicyOptions options, Clock clock = null)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            var json = new ConfigJson().Breaker(options.Breaker).Budget(options.Budget).Classifier(options.Classifier);
            if (options.Quota != null) json.Quota(options.Quota);
            Clock own = null;
            if (clock == null) clock = own = new SystemClock();
            try
            {
                Handle = json.Build(c =>
                {
                    var breaker = Own(c.NewBreaker(clock));
                    var budget = Own(c.NewRetryBudget(clock));
                    var quota = options.Quota != null ? Own(c.NewRetryQuota()) : null;
                    return New(breaker, budget, quota, Own(c.NewClassifier()));
                });
                Breaker = (Breaker)owned[0];
                Quota = owned.OfType<RetryQuota>().FirstOrDefault();
            }
            catch
            {
                foreach (var o in owned) o.Dispose();
                throw;
            }
            finally
            {
                if (own != null) own.Dispose();
            }
        }

        T Own<T>(T part) where T : IDisposable
        {
            owned.Add(part);
            return part;
        }

        /// <summary>Releases the policy, and the parts it built.</summary>
        public void Dispose()
        {
            Handle.Dispose();
            foreach (var o in owned) o.Dispose();
            owned.Clear();
        }

        /// <summary>Before an attempt of the logical call <paramref name="call"/>: Go (with a
        /// permit), Wait for the breaker, or GiveUp. A first attempt does not wait for an open
        /// breaker. ArgumentNullException for a null <paramref name="call"/>.</summary>
        public Before BeforeAttempt(PolicyCall call)
        {
            if (call == null) throw new ArgumentNullException(nameof(call));
            BeforeC b;
            PermitC p;
            Status.Check(Native.holdoff_policy_before_attempt(Handle, call.Handle, out b, out p));
            return new Before(b, p);
        }

        /// <summary>After an attempt: records its <paramref name="outcome"/> on
        /// <paramref name="permit"/> and decides (done, retry after a delay, give up).
        /// ArgumentNullException for a null <paramref name="call"/> or <paramref name="permit"/>;
        /// PermitException for a permit already recorded; ArgumentOutOfRangeException (ParamName
        /// delay) for a retry-later with a negative delay.</summary>
        public Decision AfterAttempt(PolicyCall call, Permit permit, Outcome outcome)
        {
            if (call == null) throw new ArgumentNullException(nameof(call));
            if (permit == null) throw new ArgumentNullException(nameof(permit));
            DecisionC d;
            Status.Check(Native.holdoff_policy_after_attempt(Handle, call.Handle, ref permit.Raw, (uint)outcome.Kind, outcome.DelayNs(), out d));
            return new Decision(d);
        }

        /// <summary><see cref="AfterAttempt"/> for an HTTP response, classified at the decision's
        /// clock reading; <paramref name="classification"/> says how. <paramref name="status"/> is
        /// whatever integer the HTTP client gave: 0..999 is a status (one outside 100..599 is a
        /// broken upstream, recorded as a failure); the core refuses any other value with
        /// InvalidInputException (ParamName status), and the permit is then recorded as cancelled
        /// (a probe frees its slot, its window stays spent). <paramref name="headers"/> are (name,
        /// value) pairs, one per field value. ArgumentNullException for a null
        /// <paramref name="call"/>, <paramref name="permit"/> or <paramref name="headers"/>.</summary>
        public Decision AfterResponse(PolicyCall call, Permit permit, long status,
            IList<KeyValuePair<string, string>> headers, out Classification classification)
        {
            if (call == null) throw new ArgumentNullException(nameof(call));
            if (permit == null) throw new ArgumentNullException(nameof(permit));
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                DecisionC d;
                ClassificationC c;
                Status.Check(Native.holdoff_policy_after_response(Handle, call.Handle, ref permit.Raw,
                    status, hs, (UIntPtr)hs.Length, out d, out c));
                classification = new Classification(c);
                return new Decision(d);
            }
            finally
            {
                Units.Free(allocated);
            }
        }

        /// <summary>Waits <paramref name="d"/> (Task.Delay, chained past its Int32.MaxValue ms
        /// limit of ~24.8 days, so a breaker open for weeks is waited out); <paramref name="ct"/>
        /// cancels it. A negative <paramref name="d"/> throws ArgumentOutOfRangeException.</summary>
        public static Task Delay(TimeSpan d, CancellationToken ct)
        {
            if (d < TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(d), d, "must not be negative");
            return Units.Delay(d, ct);
        }
    }
}
