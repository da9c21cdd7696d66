using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A circuit breaker for one upstream. Thread-safe; while closed, allow and
    /// recording a success take no lock.</summary>
    public sealed class Breaker : IDisposable
    {
        internal readonly BreakerHandle Handle;

        internal Breaker(BreakerHandle h) { Handle = h; }

        /// <summary>A closed breaker reading <paramref name="clock"/> (the system clock when null).
        /// Throws InvalidConfigException (an ArgumentException) naming the invalid property and
        /// field; ArgumentNullException for a null <paramref name="options"/>.</summary>
        public Breaker(BreakerOptions options, Clock clock = null)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            Handle = new ConfigJson().Breaker(options).Build(c => c.NewBreaker(clock)).Handle;
        }

        /// <summary>Releases this object (a group's breaker stays in its group).</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>Ticks the breaker's fleet now: sends what the breaker queued (a trip, a
        /// retry-later, a probe's answer, a claim), makes one exchange with the store (bounded by
        /// <see cref="FleetOptions.Timeout"/>) and applies the shared record. A Redis fleet does
        /// this on its background thread; this is for tests and memory:// fleets. A failing store
        /// is in the result (Ok false, Failure), not an exception. InvalidInputException (ParamName
        /// breaker) when the breaker has no fleet.</summary>
        public FleetSync SyncFleet()
        {
            Interop.FleetSyncC r;
            Status.Check(Native.holdoff_breaker_sync_fleet(Handle, out r));
            return new FleetSync(r);
        }

        /// <summary>Whether the breaker follows its fleet now: false without a fleet, or while
        /// detached (<see cref="FleetOptions.FallbackAfter"/> without a successful sync).</summary>
        public bool FleetAttached
        {
            get
            {
                byte a;
                Status.Check(Native.holdoff_breaker_fleet_attached(Handle, out a));
                return a != 0;
            }
        }

        /// <summary>Admits the call (true, with its permit) or refuses it (false, with the refusal
        /// and a null permit). The only act of admission: never use it as a "ready?" check.</summary>
        public bool TryAllow(out Permit permit, out BreakerOpenException refusal)
        {
            PermitC p;
            RefusalC r;
            uint st = Native.holdoff_breaker_allow(Handle, out p, out r);
            Status.Check(st);
            if (st == Status.Ok)
            {
                permit = new Permit(p);
                refusal = null;
                return true;
            }
            permit = null;
            refusal = new BreakerOpenException(Units.Opt(r.HasRetryAfter, r.RetryAfterNs), (State)r.State, r.Episode);
            return false;
        }

        /// <summary>Admits the call or throws <see cref="BreakerOpenException"/>.</summary>
        public Permit Allow()
        {
            Permit p;
            BreakerOpenException refusal;
            if (!TryAllow(out p, out refusal)) throw refusal;
            return p;
        }

        /// <summary>Records the outcome of an admitted call, and says what that did. Throws
        /// PermitException for a second record or a permit of another breaker (which stays
        /// usable); ArgumentNullException for a null <paramref name="permit"/>;
        /// ArgumentOutOfRangeException (ParamName delay) for a retry-later with a negative
        /// delay.</summary>
        public Effect Record(Permit permit, Outcome outcome)
        {
            if (permit == null) throw new ArgumentNullException("permit");
            uint effect;
            Status.Check(Native.holdoff_breaker_record(Handle, ref permit.Raw, (uint)outcome.Kind, outcome.DelayNs(), out effect));
            return (Effect)effect;
        }

        /// <summary>One call through the breaker, no retries: throws <see cref="BreakerOpenException"/>
        /// when refused, otherwise runs <paramref name="fn"/> with <paramref name="ct"/> and records
        /// what it came to (an exception as <see cref="Outcome.Classify"/> says; the cancellation of
        /// <paramref name="ct"/>, and a programming error, as cancelled, which moves nothing), then
        /// rethrows its exception unchanged. ArgumentNullException for a null <paramref name="fn"/>.</summary>
        public Task ExecuteAsync(Func<CancellationToken, Task> fn, CancellationToken ct = default(CancellationToken))
        {
            if (fn == null) throw new ArgumentNullException("fn");
            return Protect(fn, ct);
        }

        async Task Protect(Func<CancellationToken, Task> fn, CancellationToken ct)
        {
            Permit p = Allow();
            try
            {
                await fn(ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                Outcome o;
                Record(p, Errors.Judge(e, ct, null, out o) == AttemptedC.Raised ? o : Outcome.Cancelled);
                throw;
            }
            Record(p, Outcome.Success);
        }

        /// <summary>The breaker's state and counters, read at once; side-effect free.</summary>
        public Snapshot Snapshot()
        {
            SnapshotC s;
            Status.Check(Native.holdoff_breaker_snapshot(Handle, out s));
            return new Snapshot(s);
        }

        /// <summary>The state changes since the last call, in order (poll it: the library
        /// never calls back).</summary>
        public List<StateChange> DrainEvents()
        {
            var outList = new List<StateChange>();
            var buf = new StateChangeC[32];
            while (true)
            {
                UIntPtr n;
                Status.Check(Native.holdoff_breaker_drain_events(Handle, buf, (UIntPtr)buf.Length, out n));
                for (int i = 0; i < (int)n; i++) outList.Add(new StateChange(buf[i]));
                if ((int)n < buf.Length) return outList;
            }
        }

        /// <summary>The breaker's series (<see cref="MetricTable.All"/>, docs/metrics.md), zeros
        /// included: <c>holdoff.breaker.state</c> (a gauge, one reading per state, 1 for the
        /// current one), then calls admitted and refused, outcomes by kind, stale answers, probes
        /// and transitions by reason, counted since the first read. That first read starts the
        /// counting (until then a call pays one load and a branch): read once when attaching an
        /// exporter, then at each collection. No upstream attribute (a group's readings carry
        /// one). ObjectDisposedException after Dispose.</summary>
        public IReadOnlyList<MetricReading> Metrics()
        {
            MetricListHandle list;
            Status.Check(Native.holdoff_breaker_metrics(Handle, out list));
            return MetricReading.Read(list);
        }

        /// <summary>Refuses every call until <see cref="Reset"/> (an operator's act; a new episode).</summary>
        public void ForceOpen() { Status.Check(Native.holdoff_breaker_force_open(Handle)); }

        /// <summary>Admits every call and never trips until <see cref="Reset"/> (a new episode).</summary>
        public void Disable() { Status.Check(Native.holdoff_breaker_disable(Handle)); }

        /// <summary>Closes the breaker with its counts cleared (a new episode).</summary>
        public void Reset() { Status.Check(Native.holdoff_breaker_reset(Handle)); }
    }
}
