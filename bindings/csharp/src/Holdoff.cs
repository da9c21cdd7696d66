// holdoff for C#: a thin skin over the C ABI (libholdoff). No breaker or budget logic lives
// here: it converts TimeSpan and the options types, maps statuses to exceptions, sleeps with
// Task.Delay and honours CancellationToken in ExecuteAsync.
//
// Every object is thread-safe and IDisposable; each wraps SafeHandles, so a handle can never be
// freed while a call is using it, and is released by the finalizer if Dispose was forgotten.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A breaker's state.</summary>
    public enum State : uint { Closed = 0, Open = 1, HalfOpen = 2, ForcedOpen = 3, Disabled = 4 }

    /// <summary>What happened to a call.</summary>
    public enum OutcomeKind : uint { Success = 0, Answer = 1, Failure = 2, Timeout = 3, RetryLater = 4, Cancelled = 5 }

    /// <summary>What recording an outcome did.</summary>
    public enum Effect : uint { Counted = 0, Stale = 1, Ignored = 2 }

    /// <summary>Why a breaker's state changed.</summary>
    public enum Reason : uint { Tripped, RetryLater, ProbeAdmitted, ProbeFailed, Recovered, ForcedOpen, Disabled, Reset }

    /// <summary>The kind of a retry decision.</summary>
    public enum DecisionKind : uint { Done = 0, Retry = 1, GiveUp = 2 }

    /// <summary>Where a retry's delay came from.</summary>
    public enum WaitSource : uint { RetryAfter = 0, Backoff = 1, Breaker = 2 }

    /// <summary>Why a caller should stop retrying (the C ABI's codes; <see cref="Names"/> gives
    /// the core's stable names).</summary>
    public enum GiveUpReason : uint
    {
        BudgetSpent = 0, RetryAfterExceedsRemaining = 1, BackoffExceedsRemaining = 2, AttemptsExhausted = 3,
        NotRetryable = 4, QuotaEmpty = 5, BreakerOpen = 6, Cancelled = 7,
        /// <summary>The server asked for longer than the Retry-After cap and the budget was built
        /// with <see cref="BudgetOptions.GiveUpAboveCap"/>; the decision's ServerDelay is the server's delay.</summary>
        RetryAfterAboveCap = 8,
        /// <summary>The call's total time ran out.</summary>
        TotalTimeout = 9,
    }

    /// <summary>Why a delay hint is unusable (<see cref="Usable"/> when it is usable).</summary>
    public enum Unusable : uint { Usable = 0, Missing = 1, Malformed = 2, Signed = 3, Conflicting = 4 }

    /// <summary>Which header a delay hint came from. The values are the C ABI's stable codes, not
    /// the order of precedence (retry-after-ms, x-ms-retry-after-ms, Retry-After, RateLimit,
    /// RateLimit-Reset, X-RateLimit-Reset).</summary>
    public enum HintSource : uint
    {
        RetryAfter = 0, RateLimitReset = 1, XRateLimitReset = 2, None = 3,
        /// <summary><c>retry-after-ms</c> (milliseconds).</summary>
        RetryAfterMs = 4,
        /// <summary><c>x-ms-retry-after-ms</c> (milliseconds).</summary>
        XMsRetryAfterMs = 5,
        /// <summary><c>RateLimit</c>, the structured field's <c>t</c> (seconds).</summary>
        RateLimit = 6,
    }

    /// <summary>What a policy says before an attempt.</summary>
    public enum BeforeAction : uint { Go = 0, Wait = 1, GiveUp = 2 }

    /// <summary>Stable names (as the conformance suite spells them) of the enums.</summary>
    public static class Names
    {
        public static string Of(State v) { return Native.Str(Native.holdoff_state_name((uint)v)); }
        public static string Of(OutcomeKind v) { return Native.Str(Native.holdoff_outcome_name((uint)v)); }
        public static string Of(Effect v) { return Native.Str(Native.holdoff_effect_name((uint)v)); }
        public static string Of(Reason v) { return Native.Str(Native.holdoff_reason_name((uint)v)); }
        public static string Of(DecisionKind v) { return Native.Str(Native.holdoff_decision_kind_name((uint)v)); }
        public static string Of(WaitSource v) { return Native.Str(Native.holdoff_wait_source_name((uint)v)); }
        public static string Of(GiveUpReason v) { return Native.Str(Native.holdoff_give_up_reason_name((uint)v)); }
        public static string Of(Unusable v) { return Native.Str(Native.holdoff_unusable_name((uint)v)); }
        public static string Of(HintSource v) { return Native.Str(Native.holdoff_hint_source_name((uint)v)); }
        public static string Of(BeforeAction v) { return Native.Str(Native.holdoff_before_action_name((uint)v)); }
    }

    /// <summary>An error of the C library: its stable name (invalid_input, clock_backwards,
    /// permit_already_recorded, foreign_permit, ...) and the field it concerns.</summary>
    public class HoldoffException : InvalidOperationException
    {
        public string Name { get; private set; }
        public string Field { get; private set; }
        public HoldoffException(string name, string field, string message) : base(message)
        {
            Name = name;
            Field = field;
        }
    }

    /// <summary>An argument out of range (Name invalid_input), e.g. a value that is not an HTTP
    /// status at all (outside 0..999, ParamName status) or a quota lease that was never acquired
    /// (ParamName lease): <see cref="ArgumentException.ParamName"/> and <see cref="Field"/> name it.</summary>
    public sealed class HoldoffInputException : ArgumentOutOfRangeException
    {
        public HoldoffInputException(string field, string message) : base(field, message) { }
        /// <summary>The stable error name, invalid_input.</summary>
        public string Name { get { return "invalid_input"; } }
        /// <summary>The argument concerned (the same as ParamName).</summary>
        public string Field { get { return ParamName; } }
    }

    /// <summary>A permit recorded twice (Name permit_already_recorded) or on a breaker that did
    /// not issue it (foreign_permit); likewise a quota lease given back twice or to another quota
    /// (Field lease). The permit or lease is unchanged: a foreign one stays usable where it was
    /// issued.</summary>
    public sealed class PermitException : HoldoffException
    {
        public PermitException(string name, string message) : base(name, "permit", message) { }
        public PermitException(string name, string field, string message) : base(name, field ?? "permit", message) { }
    }

    /// <summary>An invalid configuration value: <see cref="ArgumentException.ParamName"/> is the
    /// field as the conformance suite names it (breaker.open_interval.multiplier).</summary>
    public sealed class HoldoffConfigException : ArgumentException
    {
        public HoldoffConfigException(string field, string message) : base(message, field) { }
        /// <summary>The stable error name, invalid_config.</summary>
        public string Name { get { return "invalid_config"; } }
    }

    internal static class Status
    {
        public const uint Ok = 0, BreakerOpen = 1, InvalidConfig = 200, InvalidInput = 201, ClockBackwards = 202,
            PermitAlreadyRecorded = 203, ForeignPermit = 204;

        /// <summary>Throws for an error status, with the calling thread's detail.</summary>
        public static void Check(uint status)
        {
            if (status == Ok || status == BreakerOpen) return;
            string name = Native.Str(Native.holdoff_status_name(status)) ?? ("status " + status);
            string field = Native.Str(Native.holdoff_last_error_field());
            string message = "holdoff: " + Native.Str(Native.holdoff_last_error_message());
            switch (status)
            {
                case InvalidConfig: throw new HoldoffConfigException(field, message);
                case PermitAlreadyRecorded:
                case ForeignPermit: throw new PermitException(name, field, message);
                case ClockBackwards: throw new HoldoffException(name, field, message);
                case InvalidInput: throw new HoldoffInputException(field, message);
                default: throw new HoldoffException(name, field, message);
            }
        }
    }

    internal static class Units
    {
        public static TimeSpan Span(ulong ns)
        {
            ulong ticks = ns / 100;
            return ticks > (ulong)long.MaxValue ? TimeSpan.MaxValue : TimeSpan.FromTicks((long)ticks);
        }

        public static TimeSpan? Opt(byte has, ulong ns) { return has != 0 ? Span(ns) : (TimeSpan?)null; }

        /// <summary>A non-negative TimeSpan as nanoseconds; a negative one is refused, never clamped.</summary>
        public static ulong Ns(TimeSpan d, string param)
        {
            if (d < TimeSpan.Zero) throw new ArgumentOutOfRangeException(param, d, "must not be negative");
            return TicksToNs(d.Ticks, param, d, "must not exceed 2^64-1 ns (about 584 years)");
        }

        /// <summary>A wall time as nanoseconds since the Unix epoch (the C ABI's unsigned count);
        /// before 1970 or after 2554 is refused, never clamped.</summary>
        public static ulong UnixNs(DateTimeOffset t, string param)
        {
            long ticks = (t - DateTimeOffset.FromUnixTimeMilliseconds(0)).Ticks;
            if (ticks < 0) throw new ArgumentOutOfRangeException(param, t, "must not be before 1970-01-01 UTC");
            return TicksToNs(ticks, param, t, "must not be after 2554-07-21 UTC (2^64-1 ns since 1970)");
        }

        static ulong TicksToNs(long ticks, string param, object value, string rule)
        {
            try
            {
                return checked((ulong)ticks * 100UL);
            }
            catch (OverflowException)
            {
                throw new ArgumentOutOfRangeException(param, value, rule);
            }
        }

        /// <summary>The longest single Task.Delay (its limit is Int32.MaxValue ms, ~24.8 days).</summary>
        static readonly TimeSpan MaxDelayChunk = TimeSpan.FromMilliseconds(int.MaxValue - 1);

        /// <summary>Task.Delay for any non-negative TimeSpan: longer waits are chained.</summary>
        public static async Task Delay(TimeSpan d, CancellationToken ct)
        {
            while (d > MaxDelayChunk)
            {
                await Task.Delay(MaxDelayChunk, ct).ConfigureAwait(false);
                d -= MaxDelayChunk;
            }
            await Task.Delay(d, ct).ConfigureAwait(false);
        }

        public static HeaderC[] Headers(IList<KeyValuePair<string, string>> headers, List<IntPtr> allocated)
        {
            if (headers == null) return new HeaderC[0];
            var arr = new HeaderC[headers.Count];
            for (int i = 0; i < headers.Count; i++)
            {
                arr[i].Name = Utf8(headers[i].Key, allocated, out arr[i].NameLen);
                arr[i].Value = Utf8(headers[i].Value, allocated, out arr[i].ValueLen);
            }
            return arr;
        }

        static IntPtr Utf8(string s, List<IntPtr> allocated, out UIntPtr len)
        {
            byte[] b = Encoding.UTF8.GetBytes(s ?? "");
            IntPtr p = Marshal.AllocHGlobal(Math.Max(b.Length, 1));
            Marshal.Copy(b, 0, p, b.Length);
            allocated.Add(p);
            len = (UIntPtr)b.Length;
            return p;
        }

        public static void Free(List<IntPtr> allocated)
        {
            foreach (var p in allocated) Marshal.FreeHGlobal(p);
        }
    }

    /// <summary>Library information and leak checks.</summary>
    public static class Library
    {
        /// <summary>The ABI this binding was written for.</summary>
        public const uint AbiVersion = 2;

        static Library()
        {
            uint got = Native.holdoff_abi_version();
            if (got != AbiVersion)
                throw new InvalidOperationException(string.Format("holdoff: library ABI {0}, binding needs {1}", got, AbiVersion));
        }

        /// <summary>Checks the linked library's ABI (throws on a mismatch).</summary>
        public static void EnsureCompatible() { }

        /// <summary>The linked library's ABI version (one call into the library each time).</summary>
        public static uint LinkedAbiVersion { get { return Native.holdoff_abi_version(); } }

        /// <summary>The linked library's version.</summary>
        public static string Version { get { return Native.Str(Native.holdoff_version()); } }

        /// <summary>C handles alive now: 0 when everything was disposed.</summary>
        public static ulong LiveHandles { get { return Native.holdoff_debug_live_handles(); } }
    }

    /// <summary>What happened to a call, as the breaker and budget need to know it.</summary>
    public partial struct Outcome : IEquatable<Outcome>
    {
        public OutcomeKind Kind { get; private set; }
        /// <summary>The provider's delay of a retry-later.</summary>
        public TimeSpan Delay { get; private set; }

        Outcome(OutcomeKind kind, TimeSpan delay) : this() { Kind = kind; Delay = delay; }

        public static readonly Outcome Success = new Outcome(OutcomeKind.Success, TimeSpan.Zero);
        /// <summary>Reachable but not retryable (a 404): proves the upstream reachable.</summary>
        public static readonly Outcome Answer = new Outcome(OutcomeKind.Answer, TimeSpan.Zero);
        public static readonly Outcome Failure = new Outcome(OutcomeKind.Failure, TimeSpan.Zero);
        public static readonly Outcome Timeout = new Outcome(OutcomeKind.Timeout, TimeSpan.Zero);
        public static readonly Outcome Cancelled = new Outcome(OutcomeKind.Cancelled, TimeSpan.Zero);

        /// <summary>The upstream asked to be left alone for <paramref name="delay"/>.</summary>
        public static Outcome RetryLater(TimeSpan delay) { return new Outcome(OutcomeKind.RetryLater, delay); }

        internal ulong DelayNs() { return Kind == OutcomeKind.RetryLater ? Units.Ns(Delay, "delay") : 0; }

        public bool Equals(Outcome o) { return Kind == o.Kind && Delay == o.Delay; }
        public override bool Equals(object o) { return o is Outcome && Equals((Outcome)o); }
        public override int GetHashCode() { return Kind.GetHashCode() ^ Delay.GetHashCode(); }
        public static bool operator ==(Outcome a, Outcome b) { return a.Equals(b); }
        public static bool operator !=(Outcome a, Outcome b) { return !a.Equals(b); }
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
    }

    /// <summary>The time source: <see cref="SystemClock"/> in production, <see cref="ManualClock"/> in tests.</summary>
    public abstract class Clock : IDisposable
    {
        internal ClockHandle Handle;

        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>The process's monotonic clock.</summary>
    public sealed class SystemClock : Clock
    {
        public SystemClock() { Status.Check(Native.holdoff_clock_new_system(out Handle)); }
    }

    /// <summary>A clock that moves only when told to. Times are TimeSpans since its origin.</summary>
    public sealed class ManualClock : Clock
    {
        /// <param name="wallOrigin">The wall time at the origin (for Retry-After HTTP-dates).</param>
        public ManualClock(DateTimeOffset wallOrigin)
        {
            Status.Check(Native.holdoff_clock_new_manual(Units.UnixNs(wallOrigin, "wallOrigin"), out Handle));
        }

        public ManualClock() : this(DateTimeOffset.FromUnixTimeMilliseconds(0)) { }

        /// <summary>Moves the clock to <paramref name="t"/>; earlier than now throws a
        /// HoldoffException named clock_backwards.</summary>
        public void Set(TimeSpan t) { Status.Check(Native.holdoff_clock_set(Handle, Units.Ns(t, "t"))); }

        /// <summary>Moves the clock forward by <paramref name="d"/> (saturating).</summary>
        public void Advance(TimeSpan d) { Status.Check(Native.holdoff_clock_advance(Handle, Units.Ns(d, "d"))); }

        public TimeSpan Now
        {
            get
            {
                ulong ns;
                Status.Check(Native.holdoff_clock_now(Handle, out ns));
                return Units.Span(ns);
            }
        }

        public DateTimeOffset WallNow
        {
            get
            {
                ulong ns;
                Status.Check(Native.holdoff_clock_wall_now(Handle, out ns));
                return DateTimeOffset.FromUnixTimeMilliseconds(0).AddTicks((long)(ns / 100));
            }
        }
    }

    /// <summary>A permit to make one call; record it exactly once.</summary>
    public sealed class Permit
    {
        internal PermitC Raw;
        internal Permit(PermitC raw) { Raw = raw; }
        /// <summary>The open episode this call probes, or 0 if admitted while closed.</summary>
        public uint Episode { get { return Raw.Episode; } }
        public bool IsProbe { get { return Raw.Probe != 0; } }
    }

    /// <summary>A side-effect-free view of a breaker.</summary>
    public sealed class Snapshot
    {
        public State State;
        public uint Episode, Recoveries, ProbesInFlight;
        public ulong Failures, Opens, Closes, Probes, Refusals, StaleAnswers, EventsDropped;
        public TimeSpan? RetryAfter, Interval;
        public bool ProbeReady;
    }

    /// <summary>One state change.</summary>
    public sealed class StateChange
    {
        public TimeSpan At;
        public State From, To;
        public uint Episode;
        public Reason Reason;
        public TimeSpan? RequestedDelay, OpenFor;
    }

    /// <summary>A circuit breaker for one upstream. Thread-safe; while closed, allow and
    /// recording a success take no lock.</summary>
    public sealed class Breaker : IDisposable
    {
        internal readonly BreakerHandle Handle;

        internal Breaker(BreakerHandle h) { Handle = h; }

        /// <summary>A closed breaker. Throws HoldoffConfigException (an ArgumentException)
        /// naming the invalid field.</summary>
        public Breaker(BreakerOptions options, Clock clock = null)
        {
            using (var c = HoldoffConfig.Parse(ConfigJson.Of(options, null, null, null)))
                Handle = c.NewBreaker(clock).Handle;
        }

        public void Dispose() { Handle.Dispose(); }

        /// <summary>Admits the call (returns its permit) or refuses it (returns null and the
        /// refusal). The only act of admission: never use it as a "ready?" check.</summary>
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

        /// <summary>Records the outcome of an admitted call. Throws PermitException for a
        /// second record or a permit of another breaker (which stays usable).</summary>
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

        public Snapshot Snapshot()
        {
            SnapshotC s;
            Status.Check(Native.holdoff_breaker_snapshot(Handle, out s));
            return new Snapshot
            {
                State = (State)s.State, Episode = s.Episode, Failures = s.Failures, Recoveries = s.Recoveries,
                ProbesInFlight = s.ProbesInFlight, RetryAfter = Units.Opt(s.HasRetryAfter, s.RetryAfterNs),
                ProbeReady = s.ProbeReady != 0, Interval = Units.Opt(s.HasInterval, s.IntervalNs), Opens = s.Opens,
                Closes = s.Closes, Probes = s.Probes, Refusals = s.Refusals, StaleAnswers = s.StaleAnswers,
                EventsDropped = s.EventsDropped,
            };
        }

        /// <summary>The state changes since the last call, in order (poll it: the library
        /// never calls back).</summary>
        public List<StateChange> DrainEvents()
        {
            var outList = new List<StateChange>();
            var buf = new EventC[32];
            while (true)
            {
                UIntPtr n;
                Status.Check(Native.holdoff_breaker_drain_events(Handle, buf, (UIntPtr)buf.Length, out n));
                for (int i = 0; i < (int)n; i++)
                {
                    var e = buf[i];
                    outList.Add(new StateChange
                    {
                        At = Units.Span(e.AtNs), From = (State)e.From, To = (State)e.To, Episode = e.Episode,
                        Reason = (Reason)e.Reason, RequestedDelay = Units.Opt(e.HasRequestedDelay, e.RequestedDelayNs),
                        OpenFor = Units.Opt(e.HasOpenFor, e.OpenForNs),
                    });
                }
                if ((int)n < buf.Length) return outList;
            }
        }

        public void ForceOpen() { Status.Check(Native.holdoff_breaker_force_open(Handle)); }
        public void Disable() { Status.Check(Native.holdoff_breaker_disable(Handle)); }
        public void Reset() { Status.Check(Native.holdoff_breaker_reset(Handle)); }
    }

    /// <summary>A side-effect-free view of a group's counts, read together
    /// (<see cref="BreakerGroup.Snapshot"/>).</summary>
    public sealed class GroupSnapshot
    {
        /// <summary>Breakers the group keeps now (at most <see cref="MaxKeys"/>; overflow breakers
        /// are not kept).</summary>
        public int Keys { get; private set; }
        /// <summary>The bound on <see cref="Keys"/>.</summary>
        public int MaxKeys { get; private set; }
        /// <summary>Idle breakers evicted to make room for a new key, since the group was made.</summary>
        public ulong Evictions { get; private set; }
        /// <summary>Overflow breakers handed out (not kept) because nothing could be evicted.</summary>
        public ulong Overflows { get; private set; }

        internal GroupSnapshot(GroupStatsC s)
        {
            // Both counts are at most the core's limit on max_keys (100 000 000): they fit an int.
            Keys = checked((int)(ulong)s.Keys);
            MaxKeys = checked((int)(ulong)s.MaxKeys);
            Evictions = s.Evictions;
            Overflows = s.Overflows;
        }
    }

    /// <summary>Breakers keyed by upstream (host, registry, provider, tenant), created on first
    /// use from one template, each with its own jitter seed mixed with its key. Thread-safe.
    ///
    /// Bounded, because keys often come from request data: the group keeps at most
    /// <see cref="MaxKeys"/> breakers (the core's default, 10 000, unless the constructor says
    /// otherwise). A new key at a full group evicts the least recently used idle breaker (closed,
    /// no failure counted); open, half-open, forced-open and disabled breakers, and closed ones
    /// counting failures, are never evicted. With none idle, the new key gets an overflow breaker
    /// the group does not keep: no call fails because the group is full.
    /// <see cref="Snapshot"/> counts evictions and overflows.</summary>
    public sealed class BreakerGroup : IDisposable
    {
        internal readonly GroupHandle Handle;
        static readonly Encoding StrictUtf8 = new UTF8Encoding(false, true);

        internal BreakerGroup(GroupHandle h) { Handle = h; }

        /// <summary>An empty group whose breakers are built from <paramref name="template"/> and
        /// read <paramref name="clock"/> (the system clock when null). <paramref name="maxKeys"/>
        /// bounds the breakers kept, 1..100 000 000; null takes the core's default (10 000).
        /// Throws HoldoffConfigException (an ArgumentException) naming the invalid field:
        /// the template's, or group.max_keys.</summary>
        public BreakerGroup(BreakerOptions template, Clock clock = null, int? maxKeys = null)
        {
            using (var c = HoldoffConfig.Parse(ConfigJson.Of(template, null, null, null, maxKeys)))
                Handle = c.NewBreakerGroup(clock).Handle;
        }

        /// <summary>The breaker the group holds for <paramref name="key"/> now (created on first
        /// use), marking it most recently used; at a full group with nothing evictable, an
        /// overflow breaker the group does not keep (a fresh one each time). Every call returns a
        /// new <see cref="Breaker"/> object: the caller owns it and disposes it when done (which
        /// releases that object only, never the group's breaker; a forgotten one is released by
        /// its finalizer). Ask the group for each call's breaker and record the permit on the
        /// object that admitted it: one kept longer may be a breaker the group has since evicted
        /// (still usable, but no longer the key's).
        /// Throws ArgumentNullException for a null key, ArgumentException (ParamName key) for a
        /// string that is not valid UTF-16.</summary>
        public Breaker Get(string key)
        {
            if (key == null) throw new ArgumentNullException("key");
            byte[] k;
            try
            {
                k = StrictUtf8.GetBytes(key);
            }
            catch (EncoderFallbackException e)
            {
                throw new ArgumentException("holdoff: the key is not valid UTF-16 (a lone surrogate)", "key", e);
            }
            BreakerHandle h;
            Status.Check(Native.holdoff_group_get(Handle, k, (UIntPtr)k.Length, out h));
            return new Breaker(h);
        }

        /// <summary>The number of breakers the group keeps (overflow breakers are not kept).</summary>
        public int Count
        {
            get
            {
                UIntPtr n;
                Status.Check(Native.holdoff_group_len(Handle, out n));
                return (int)(ulong)n;
            }
        }

        /// <summary>The most breakers the group keeps (1..100 000 000).</summary>
        public int MaxKeys { get { return Snapshot().MaxKeys; } }

        /// <summary>The group's counts (breakers kept, MaxKeys, evictions, overflows), read
        /// together. Side-effect free: marks no key used.</summary>
        public GroupSnapshot Snapshot()
        {
            GroupStatsC s;
            Status.Check(Native.holdoff_group_snapshot(Handle, out s));
            return new GroupSnapshot(s);
        }

        /// <summary>The keys the group keeps now, sorted by their UTF-8 bytes (a copy). Side-effect
        /// free: marks no key used.</summary>
        public IReadOnlyList<string> Keys()
        {
            KeyListHandle list;
            Status.Check(Native.holdoff_group_keys(Handle, out list));
            using (list)
            {
                UIntPtr n;
                Status.Check(Native.holdoff_key_list_len(list, out n));
                var keys = new string[(int)(ulong)n];
                for (int i = 0; i < keys.Length; i++)
                {
                    IntPtr p;
                    UIntPtr len;
                    Status.Check(Native.holdoff_key_list_get(list, (UIntPtr)i, out p, out len));
                    var b = new byte[(int)(ulong)len];
                    Marshal.Copy(p, b, 0, b.Length);
                    keys[i] = Encoding.UTF8.GetString(b);
                }
                return keys;
            }
        }

        /// <summary>Releases the group. Breakers obtained from it stay valid (each is released by
        /// its own Dispose).</summary>
        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>A retry decision.</summary>
    public sealed class Decision
    {
        public DecisionKind Kind;
        /// <summary>The wait before the next attempt (Retry).</summary>
        public TimeSpan Delay;
        public WaitSource Source;
        /// <summary>The server's own Retry-After before the cap.</summary>
        public TimeSpan? ServerDelay;
        /// <summary>Whether the cap shortened the server's value (never silent).</summary>
        public bool Capped;
        public GiveUpReason Reason;

        internal static Decision Of(DecisionC d)
        {
            return new Decision
            {
                Kind = (DecisionKind)d.Kind, Delay = Units.Span(d.DelayNs), Source = (WaitSource)d.Source,
                ServerDelay = Units.Opt(d.HasServerDelay, d.ServerDelayNs), Capped = d.Capped != 0,
                Reason = (GiveUpReason)d.Reason,
            };
        }
    }

    /// <summary>The per-call part of retrying: one per logical call.</summary>
    public sealed class RetryState : IDisposable
    {
        internal readonly RetryStateHandle Handle;
        public RetryState() { Status.Check(Native.holdoff_retry_state_new(out Handle)); }
        public int Retries
        {
            get
            {
                uint n;
                Status.Check(Native.holdoff_retry_state_retries(Handle, out n));
                return (int)n;
            }
        }
        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>The retry budget of one upstream (rate-limit episodes, Retry-After cap, counted
    /// backoff).</summary>
    public sealed class RetryBudget : IDisposable
    {
        internal readonly BudgetHandle Handle;

        internal RetryBudget(BudgetHandle h) { Handle = h; }

        public RetryBudget(BudgetOptions options, Clock clock = null)
        {
            using (var c = HoldoffConfig.Parse(ConfigJson.Of(null, options, null, null)))
                Handle = c.NewRetryBudget(clock).Handle;
        }

        public Decision Decide(RetryState call, Outcome outcome)
        {
            DecisionC d;
            Status.Check(Native.holdoff_budget_decide(Handle, call.Handle, (uint)outcome.Kind, outcome.DelayNs(), out d));
            return Decision.Of(d);
        }

        /// <summary>When the current rate-limit episode started, or null.</summary>
        public TimeSpan? EpisodeStart
        {
            get
            {
                EpisodeC e;
                Status.Check(Native.holdoff_budget_episode(Handle, out e));
                return Units.Opt(e.Active, e.StartNs);
            }
        }

        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>The result of <see cref="RetryQuota.Acquire"/>: the tokens of one retry, issued
    /// by one quota. Give an acquired lease back once, to the quota that issued it, with
    /// <see cref="RetryQuota.OnSuccess"/>; the core checks both (thread-safe: of concurrent
    /// give-backs of one lease, one succeeds).</summary>
    public sealed class QuotaLease
    {
        internal QuotaLeaseC Raw;
        internal QuotaLease(QuotaLeaseC raw) { Raw = raw; }
        public bool Acquired { get { return Raw.Acquired != 0; } }
        public ulong Cost { get { return Raw.Cost; } }
        public ulong Available { get { return Raw.Available; } }
    }

    /// <summary>A token bucket shared by every caller of an upstream.</summary>
    public sealed class RetryQuota : IDisposable
    {
        internal readonly QuotaHandle Handle;

        internal RetryQuota(QuotaHandle h) { Handle = h; }

        public RetryQuota(QuotaOptions options)
        {
            using (var c = HoldoffConfig.Parse(ConfigJson.Of(null, null, options, null)))
                Handle = c.NewRetryQuota().Handle;
        }

        public QuotaLease Acquire(bool afterTimeout)
        {
            QuotaLeaseC l;
            Status.Check(Native.holdoff_quota_acquire(Handle, (byte)(afterTimeout ? 1 : 0), out l));
            return new QuotaLease(l);
        }

        /// <summary>The call succeeded: refunds <paramref name="lease"/>, or adds the configured
        /// refill when it is null (the call needed no retry); never past capacity. The core checks
        /// the lease: <see cref="PermitException"/> (Field lease) named permit_already_recorded when
        /// it was already given back, foreign_permit when another quota issued it (it stays usable
        /// there); <see cref="HoldoffInputException"/> when it was never acquired. The bucket is
        /// unchanged on every error.</summary>
        public void OnSuccess(QuotaLease lease)
        {
            if (lease == null) Status.Check(Native.holdoff_quota_on_success_no_lease(Handle, IntPtr.Zero));
            else Status.Check(Native.holdoff_quota_on_success(Handle, ref lease.Raw));
        }

        public ulong Available
        {
            get
            {
                ulong n;
                Status.Check(Native.holdoff_quota_available(Handle, out n));
                return n;
            }
        }

        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>A parsed delay hint.</summary>
    public sealed class Hint
    {
        public TimeSpan Delay;
        public Unusable Unusable;
        public HintSource Source;
        internal static Hint Of(RetryAfterC r)
        {
            return new Hint { Delay = Units.Span(r.DelayNs), Unusable = (Unusable)r.Unusable, Source = (HintSource)r.Source };
        }
    }

    /// <summary>A classified HTTP response.</summary>
    public sealed class Classification
    {
        /// <summary>What the breaker and the budget are told.</summary>
        public Outcome Outcome;
        /// <summary>The response's delay hint (its source says which header).</summary>
        public Hint Hint;
        /// <summary>The response's <c>x-should-retry</c> (true or false), null without one (or with
        /// another value). false makes any status from 400 up an answer and true makes an answer a
        /// failure; it never changes a success, a broken status or a status listed in the
        /// classifier's options (<see cref="Outcome"/> already says the result).</summary>
        public bool? ShouldRetry;
        internal static Classification Of(ClassificationC c)
        {
            var kind = (OutcomeKind)c.Outcome;
            return new Classification
            {
                Outcome = kind == OutcomeKind.RetryLater ? Outcome.RetryLater(Units.Span(c.RetryLaterNs)) : Simple(kind),
                Hint = Hint.Of(c.Hint),
                ShouldRetry = c.HasShouldRetry != 0 ? c.ShouldRetry != 0 : (bool?)null,
            };
        }

        static Outcome Simple(OutcomeKind k)
        {
            switch (k)
            {
                case OutcomeKind.Success: return Outcome.Success;
                case OutcomeKind.Answer: return Outcome.Answer;
                case OutcomeKind.Timeout: return Outcome.Timeout;
                case OutcomeKind.Cancelled: return Outcome.Cancelled;
                default: return Outcome.Failure;
            }
        }
    }

    /// <summary>Retry-After (RFC 9110 §10.2.3) and rate-limit headers.</summary>
    public static class RetryAfterHeader
    {
        /// <summary>Parses one Retry-After value against the wall time <paramref name="now"/>.
        /// Garbage is unusable, never an exception.</summary>
        public static Hint Parse(string value, DateTimeOffset now)
        {
            byte[] b = Encoding.UTF8.GetBytes(value ?? "");
            RetryAfterC r;
            Status.Check(Native.holdoff_parse_retry_after(b, (UIntPtr)b.Length, Units.UnixNs(now, "now"), out r));
            return Hint.Of(r);
        }

        /// <summary>The delay hint of a response's headers.</summary>
        public static Hint FromHeaders(IList<KeyValuePair<string, string>> headers, DateTimeOffset now)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                RetryAfterC r;
                Status.Check(Native.holdoff_hint_from_headers(hs, (UIntPtr)hs.Length, Units.UnixNs(now, "now"), out r));
                return Hint.Of(r);
            }
            finally
            {
                Units.Free(allocated);
            }
        }
    }

    /// <summary>Turns an HTTP response into an outcome.</summary>
    public sealed class Classifier : IDisposable
    {
        internal readonly ClassifierHandle Handle;

        internal Classifier(ClassifierHandle h) { Handle = h; }

        public Classifier(ClassifierOptions options)
        {
            using (var c = HoldoffConfig.Parse(ConfigJson.Of(null, null, null, options)))
                Handle = c.NewClassifier().Handle;
        }

        /// <summary>Classifies a response: <paramref name="status"/> is whatever integer the HTTP
        /// client gave. 0..999 is a status (one outside 100..599 is a broken upstream: a failure,
        /// whatever the headers say); the core refuses any other value with HoldoffInputException
        /// (an ArgumentException, Name invalid_input, ParamName status). HTTP-dates are compared
        /// with the wall time <paramref name="now"/>.</summary>
        public Classification Classify(long status, IList<KeyValuePair<string, string>> headers, DateTimeOffset now)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                ClassificationC c;
                Status.Check(Native.holdoff_classifier_classify(Handle, status, hs,
                    (UIntPtr)hs.Length, Units.UnixNs(now, "now"), out c));
                return Classification.Of(c);
            }
            finally
            {
                Units.Free(allocated);
            }
        }

        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>What to do before an attempt.</summary>
    public sealed class Before
    {
        public BeforeAction Action;
        /// <summary>The wait for the breaker (Wait).</summary>
        public TimeSpan Delay;
        public GiveUpReason Reason;
        /// <summary>The breaker's time until its next probe (GiveUp; null while forced open).</summary>
        public TimeSpan? RetryAfter;
        /// <summary>The permit of the attempt (Go).</summary>
        public Permit Permit;
    }

    /// <summary>The state of one logical call under a policy.</summary>
    public sealed class PolicyCall : IDisposable
    {
        internal readonly PolicyCallHandle Handle;
        public PolicyCall() { Status.Check(Native.holdoff_policy_call_new(out Handle)); }
        public int Attempts
        {
            get
            {
                uint n;
                Status.Check(Native.holdoff_policy_call_attempts(Handle, out n));
                return (int)n;
            }
        }
        public void Dispose() { Handle.Dispose(); }
    }

    /// <summary>One upstream's breaker, retry budget, optional quota and classifier. The retry
    /// helpers (ExecuteAsync, Execute, <see cref="HoldoffHandler"/>) and their options are in
    /// Execute.cs.</summary>
    public sealed partial class Policy : IDisposable
    {
        internal readonly PolicyHandle Handle;
        readonly List<IDisposable> owned = new List<IDisposable>();

        /// <summary>The policy's breaker (snapshots, events).</summary>
        public Breaker Breaker { get; private set; }

        Policy(Breaker breaker, RetryBudget budget, RetryQuota quota, Classifier classifier)
        {
            Breaker = breaker;
            Status.Check(Native.holdoff_policy_new(breaker.Handle, budget.Handle,
                quota != null ? quota.Handle : new QuotaHandle(),
                classifier != null ? classifier.Handle : new ClassifierHandle(), out Handle));
        }

        /// <summary>Composes existing parts (quota and classifier may be null); the breaker and
        /// the budget must read the same clock (HoldoffConfigException, field policy.clock).</summary>
        public static Policy Compose(Breaker breaker, RetryBudget budget, RetryQuota quota, Classifier classifier)
        {
            return new Policy(breaker, budget, quota, classifier);
        }

        /// <summary>Builds a policy and its parts with one clock; disposing it disposes them.</summary>
        public Policy(PolicyOptions options, Clock clock = null)
        {
            Clock own = null;
            if (clock == null) clock = own = new SystemClock();
            try
            {
                using (var c = HoldoffConfig.Parse(ConfigJson.Of(options.Breaker, options.Budget, options.Quota, options.Classifier)))
                {
                    Breaker = c.NewBreaker(clock);
                    owned.Add(Breaker);
                    var budget = c.NewRetryBudget(clock);
                    owned.Add(budget);
                    RetryQuota quota = null;
                    if (options.Quota != null)
                    {
                        quota = c.NewRetryQuota();
                        owned.Add(quota);
                    }
                    var classifier = c.NewClassifier();
                    owned.Add(classifier);
                    Status.Check(Native.holdoff_policy_new(Breaker.Handle, budget.Handle,
                        quota != null ? quota.Handle : new QuotaHandle(), classifier.Handle, out Handle));
                }
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

        public void Dispose()
        {
            Handle.Dispose();
            foreach (var o in owned) o.Dispose();
            owned.Clear();
        }

        /// <summary>Go (with a permit), wait for the breaker, or give up. A first attempt does
        /// not wait for an open breaker.</summary>
        public Before Before(PolicyCall call)
        {
            BeforeC b;
            PermitC p;
            Status.Check(Native.holdoff_policy_before(Handle, call.Handle, out b, out p));
            return new Before
            {
                Action = (BeforeAction)b.Action, Delay = Units.Span(b.DelayNs), Reason = (GiveUpReason)b.Reason,
                RetryAfter = Units.Opt(b.HasRetryAfter, b.RetryAfterNs),
                Permit = b.Action == (uint)BeforeAction.Go ? new Permit(p) : null,
            };
        }

        /// <summary>Records the attempt's outcome and decides.</summary>
        public Decision After(PolicyCall call, Permit permit, Outcome outcome)
        {
            DecisionC d;
            Status.Check(Native.holdoff_policy_after(Handle, call.Handle, ref permit.Raw, (uint)outcome.Kind, outcome.DelayNs(), out d));
            return Decision.Of(d);
        }

        /// <summary>After for an HTTP response, classified at the decision's clock reading.
        /// <paramref name="status"/> is whatever integer the HTTP client gave: 0..999 is a status
        /// (one outside 100..599 is a broken upstream, recorded as a failure); the core refuses
        /// any other value with HoldoffInputException (ParamName status), and the permit is then
        /// recorded as cancelled (a probe frees its slot, its window stays spent).</summary>
        public Decision AfterResponse(PolicyCall call, Permit permit, long status,
            IList<KeyValuePair<string, string>> headers, out Classification classification)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                DecisionC d;
                ClassificationC c;
                Status.Check(Native.holdoff_policy_after_response(Handle, call.Handle, ref permit.Raw,
                    status, hs, (UIntPtr)hs.Length, out d, out c));
                classification = Classification.Of(c);
                return Decision.Of(d);
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
            if (d < TimeSpan.Zero) throw new ArgumentOutOfRangeException("d", d, "must not be negative");
            return Units.Delay(d, ct);
        }
    }
}
