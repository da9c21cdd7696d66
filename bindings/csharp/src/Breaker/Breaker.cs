using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A circuit breaker for one upstream. Thread-safe; while closed, admitting a call
    /// and recording its success read the breaker's fast-path word in place (docs/ffi.md "The
    /// fast-path word") and make no call into the native library. A breaker made without a clock
    /// refuses in place too while open (docs/ffi.md "The refusal block"): it reads the block
    /// beside the word and Stopwatch's clock mapped onto the library's.</summary>
    public sealed class Breaker : IDisposable
    {
        /// <summary>The fast-path word layout this binding reads; another version reported by the
        /// library turns the fast path off (every call goes to the library).</summary>
        internal const uint FastPathVersion = 1;

        /// <summary>The refusal block layout and protocol this binding implements; another version
        /// reported by the library sends every refusal to the library.</summary>
        internal const uint RefusalPathVersion = 1;

        // What Load gives without a usable word: it admits nothing (state bits 7) and matches no
        // clean success.
        const ulong NoWord = ulong.MaxValue;

        // Bits of `gate`: Dispose was called; the native breaker was freed; refusals are decided
        // on the refusal block; admissions and clean successes are decided on the word (these two
        // set once, by the constructor: bits here rather than fields of their own keep the object
        // at 32 bytes, a header, `raw` and `gate`); calls in flight.
        const int Closed = int.MinValue;
        const int Freed = 1 << 30;
        const int InPlace = 1 << 29;
        const int WordBit = 1 << 28;
        const int InFlight = WordBit - 1;

        // Byte offset of the breaker's id in the refusal block (docs/ffi.md "The refusal block"),
        // whose word, at offset 0, is where the native breaker's handle points.
        const int IdOffset = 28;

        // The library's admit mask (a constant of the loaded library, the same for every breaker:
        // kept once rather than in each object), 0 until the first breaker reads it.
        static long admitMask;
        // The library's counting mask of the refusal block, kept once in the same way.
        static long countingMask;

        // The holdoff_breaker* this object owns, freed once: by Dispose, by the last call in
        // flight after Dispose, or by the finalizer. With WordBit set in `gate` it is also the
        // address of the native breaker's 64-bit fast-path word, the start of its refusal block
        // (the permits' breaker id at IdOffset), read there rather than kept in fields here.
        readonly IntPtr raw;
        // Calls into the library in flight on `raw`, with the Closed, Freed, InPlace and WordBit
        // bits (WordBit: the library's fast-path word is version 1 and at `raw`, else every call
        // goes to the library; InPlace: the word's block is version 1 and the breaker reads the
        // breakers' shared, mapped system clock, else every refusal goes to the library): the
        // native breaker is freed only once Closed is set and nothing is in flight. Two interlocked
        // operations a call, cheaper than a SafeHandle's reference (and one object less per
        // breaker). Reads of the word do not count here (they would make two threads on one
        // breaker contend for this field): each announces itself in its thread's WordReader,
        // and Dispose waits those out before the breaker can be freed.
        int gate;

        /// <summary>Takes over the native breaker of <paramref name="h"/> (which is left invalid:
        /// this object frees the breaker). <paramref name="onSharedClock"/>: it reads
        /// <see cref="BreakerClock.Shared"/>, so it may refuse in place.</summary>
        internal unsafe Breaker(BreakerHandle h, bool onSharedClock = false)
        {
            raw = h.DangerousGetHandle();
            h.SetHandleAsInvalid();
            FastPathC fp;
            if (Native.holdoff_breaker_fast_path(raw, out fp) != Status.Ok) return;
            // The permit's recorded flag is set with a 32-bit compare-and-swap on a little-endian
            // layout (Permit.MarkRecorded). The word and the id are read at `raw` (the handle is
            // the address of the core's breaker, whose refusal block starts with the word): a
            // library where they are not there gets every call.
            if (fp.Version != FastPathVersion || fp.Word != raw || fp.AdmitMask == 0 || !BitConverter.IsLittleEndian) return;
            long mask = Interlocked.CompareExchange(ref admitMask, (long)fp.AdmitMask, 0);
            if (mask != 0 && mask != (long)fp.AdmitMask) return;
            if (Volatile.Read(ref *(uint*)((byte*)raw + IdOffset)) != fp.Breaker) return;
            int g = WordBit;
            if (onSharedClock && BreakerClock.Mapped && RefusalBlock(raw, fp.Word)) g |= InPlace;
            gate = g;
        }

        /// <summary>Whether the library's refusal block of <paramref name="breaker"/> is the one
        /// this binding implements: version 1, its cells at their offsets from
        /// <paramref name="word"/>, the counting mask the one kept.</summary>
        static bool RefusalBlock(IntPtr breaker, IntPtr word)
        {
            RefusalPathC rp;
            if (Native.holdoff_breaker_refusal_path(breaker, out rp) != Status.Ok) return false;
            long w = word.ToInt64();
            if (rp.Version != RefusalPathVersion || rp.Word != word || rp.RefuseUntil.ToInt64() != w + 8
                || rp.Refusals.ToInt64() != w + 16 || rp.Seq.ToInt64() != w + 24 || rp.CountingMask == 0)
                return false;
            long mask = Interlocked.CompareExchange(ref countingMask, (long)rp.CountingMask, 0);
            return mask == 0 || mask == (long)rp.CountingMask;
        }

        /// <summary>A closed breaker reading <paramref name="clock"/> (when null, the one system
        /// clock every breaker made without a clock shares: only such a breaker refuses in place).
        /// Throws InvalidConfigException (an ArgumentException) naming the invalid property and
        /// field; ArgumentNullException for a null <paramref name="options"/>.</summary>
        public Breaker(BreakerOptions options, Clock clock = null) : this(Create(options, clock), clock == null) { }

        static BreakerHandle Create(BreakerOptions options, Clock clock)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            return new ConfigJson().Breaker(options).Build(c => c.NewBreakerHandle(clock));
        }

        /// <summary>Frees a forgotten breaker (nothing can be in flight on an unreachable one).</summary>
        ~Breaker()
        {
            if ((gate & Freed) == 0) Native.holdoff_breaker_free(raw);
        }

        /// <summary>Whether admissions and clean successes are decided on the fast-path word
        /// (false when the library reports another layout version).</summary>
        internal bool OnWord { get { return (Volatile.Read(ref gate) & WordBit) != 0; } }

        /// <summary>Whether refusals are decided on the refusal block (false: every refusal goes
        /// to the library).</summary>
        internal bool RefusesInPlace { get { return (Volatile.Read(ref gate) & InPlace) != 0; } }

        /// <summary>Whether Dispose has been called (the native breaker may still be waiting for
        /// calls in flight).</summary>
        internal bool Closing { get { return Volatile.Read(ref gate) < 0; } }

        /// <summary>The native breaker, for a call between <see cref="Acquire"/> and
        /// <see cref="Leave"/>.</summary>
        internal IntPtr Raw { get { return raw; } }

        /// <summary>Releases this object (a group's breaker stays in its group; a policy's stays
        /// with the policy). Idempotent; every later call on it throws ObjectDisposedException.
        /// The native breaker is freed at once, or by the last call still in flight.</summary>
        public void Dispose()
        {
            // Closed, and Dispose itself counted in flight until the word's readers are waited
            // out, so that no call leaving meanwhile frees the breaker under a reader.
            int g = Volatile.Read(ref gate);
            while (true)
            {
                if ((g & Closed) != 0) return;
                int seen = Interlocked.CompareExchange(ref gate, (g | Closed) + 1, g);
                if (seen == g) break;
                g = seen;
            }
            GC.SuppressFinalize(this);
            if (OnWord) WordReader.WaitOut(this);
            Leave();
        }

        /// <summary>Frees the native breaker if Dispose was called, nothing is in flight and it
        /// was not freed yet.</summary>
        void Free()
        {
            int g = Volatile.Read(ref gate);
            while ((g & Closed) != 0 && (g & (Freed | InFlight)) == 0)
            {
                int seen = Interlocked.CompareExchange(ref gate, g | Freed, g);
                if (seen == g)
                {
                    Native.holdoff_breaker_free(raw);
                    return;
                }
                g = seen;
            }
        }

        /// <summary>Enters a section in which the native breaker cannot be freed, or throws
        /// ObjectDisposedException after Dispose. Pair with one <see cref="Leave"/>.</summary>
        internal void Acquire()
        {
            if (Interlocked.Increment(ref gate) < 0) ThrowDisposed();
        }

        /// <summary>Leaves the section just entered on a closed gate and throws
        /// ObjectDisposedException.</summary>
        void ThrowDisposed()
        {
            Leave();
            throw new ObjectDisposedException(typeof(Breaker).FullName);
        }

        /// <summary>Leaves a section entered by <see cref="Acquire"/>; the last one out after
        /// Dispose frees the native breaker.</summary>
        internal void Leave()
        {
            int g = Interlocked.Decrement(ref gate);
            if (g < 0 && (g & InFlight) == 0) Free();
        }

        // The bits of `gate` that say whether a reader may touch the native breaker's block: it
        // may when they are WordBit alone (on the word, not closed).
        const int ReadableMask = Closed | WordBit;

        /// <summary>The fast-path word as loaded now (acquire), or <see cref="NoWord"/> when there
        /// is no usable word or after Dispose.</summary>
        unsafe ulong Load()
        {
            var r = WordReader.Mine();
            // Announce the read (a full fence), then check Closed: see WordReader.WaitOut.
            Interlocked.Exchange(ref r.Reading, this);
            ulong w = (Volatile.Read(ref gate) & ReadableMask) != WordBit ? NoWord : Volatile.Read(ref *(ulong*)raw);
            Volatile.Write(ref r.Reading, null);
            return w;
        }

        /// <summary>Whether a success on <paramref name="p"/> is clean (docs/ffi.md "The fast-path
        /// word"): a permit of this breaker, not a probe, and the word, loaded now, closed in its
        /// episode with no failure pending and no flag. False without a usable word or after
        /// Dispose.</summary>
        unsafe bool CleanSuccess(ref PermitC p)
        {
            if (p.RawProbe != 0) return false;
            var r = WordReader.Mine();
            // Announce the read (a full fence), then check Closed: see WordReader.WaitOut. The id
            // is read inside the announced read too.
            Interlocked.Exchange(ref r.Reading, this);
            bool clean = (Volatile.Read(ref gate) & ReadableMask) == WordBit
                && *(uint*)((byte*)raw + IdOffset) == p.RawBreaker
                && Volatile.Read(ref *(ulong*)raw) == (ulong)p.RawEpisode << 32;
            Volatile.Write(ref r.Reading, null);
            return clean;
        }

        /// <summary>The fast-path word as <see cref="Load"/> gives it, with the breaker's
        /// <paramref name="id"/> when it admits (else 0); when it does not admit and the
        /// breaker refuses in place, also the refusal decided on the refusal block in the same
        /// read (refused true, <paramref name="refusal"/> filled, the refusal counted).</summary>
        unsafe ulong LoadOrRefuse(out bool refused, out RefusalC refusal, out uint id)
        {
            refused = false;
            refusal = default(RefusalC);
            id = 0;
            var r = WordReader.Mine();
            // Announce the read (a full fence), then check Closed: see WordReader.WaitOut. The
            // id, the refusal's reads and its count are inside the announced read too.
            Interlocked.Exchange(ref r.Reading, this);
            ulong w = NoWord;
            int g = Volatile.Read(ref gate);
            if ((g & ReadableMask) == WordBit)
            {
                var word = (ulong*)raw;
                bool inPlace = (g & InPlace) != 0;
                // The protocol reads the sequence counter before the word.
                uint s = inPlace ? Volatile.Read(ref *(uint*)(word + 3)) : 0;
                w = Volatile.Read(ref *word);
                if (Admits(w)) id = *(uint*)((byte*)word + IdOffset);
                else if (inPlace) refused = Refuse(s, w, ref refusal);
            }
            Volatile.Write(ref r.Reading, null);
            return w;
        }

        /// <summary>The refusal protocol of docs/ffi.md "The refusal block" (version 1) on this
        /// breaker's block, given <paramref name="s"/> and <paramref name="w"/> (the sequence
        /// counter, then the word, as loaded): true with the refusal the library would have given,
        /// counted in the block's refusal count; false when the library must decide. Only between
        /// the announcement and the end of a read of the word (the native breaker is alive).</summary>
        unsafe bool Refuse(uint s, ulong w, ref RefusalC refusal)
        {
            var word = (ulong*)raw;
            // Counting metrics: the library counts every refusal in them too.
            if ((w & (ulong)countingMask) != 0) return false;
            uint state = (uint)(w & 7);
            if (state == (uint)State.Open || state == (uint)State.HalfOpen)
            {
                ulong until = Volatile.Read(ref word[1]);
                if ((s & 1) != 0 || until == 0 || Volatile.Read(ref *(uint*)(word + 3)) != s) return false;
                ulong now = BreakerClock.NowNs();
                // A probe may be due: the library decides.
                if (now >= until) return false;
                refusal.RetryAfterNs = until - now;
                refusal.HasRetryAfter = 1;
            }
            else if (state != (uint)State.ForcedOpen)
            {
                return false;
            }
            refusal.State = state;
            refusal.Episode = (uint)(w >> 32);
            Interlocked.Increment(ref *(long*)(word + 2));
            return true;
        }

        /// <summary>Whether <paramref name="w"/> admits a call without the library.</summary>
        static bool Admits(ulong w) { return (w & (ulong)admitMask) == 0; }

        /// <summary>Ticks the breaker's fleet now: sends what the breaker queued (a trip, a
        /// retry-later, a probe's answer, a claim), makes one exchange with the store (bounded by
        /// <see cref="FleetOptions.Timeout"/>) and applies the shared record. A Redis fleet does
        /// this on its background thread; this is for tests and memory:// fleets. A failing store
        /// is in the result (Ok false, Failure), not an exception. InvalidInputException (ParamName
        /// breaker) when the breaker has no fleet.</summary>
        public FleetSync SyncFleet()
        {
            Interop.FleetSyncC r;
            uint st;
            Acquire();
            try
            {
                st = Native.holdoff_breaker_sync_fleet(raw, out r);
            }
            finally
            {
                Leave();
            }
            Status.Check(st);
            return new FleetSync(r);
        }

        /// <summary>Whether the breaker follows its fleet now: false without a fleet, or while
        /// detached (<see cref="FleetOptions.FallbackAfter"/> without a successful sync).</summary>
        public bool FleetAttached
        {
            get
            {
                byte a;
                uint st;
                Acquire();
                try
                {
                    st = Native.holdoff_breaker_fleet_attached(raw, out a);
                }
                finally
                {
                    Leave();
                }
                Status.Check(st);
                return a != 0;
            }
        }

        /// <summary>Admits the call (true, with its permit) or refuses it (false, with the refusal
        /// and a null permit). The only act of admission: never use it as a "ready?" check.
        /// ObjectDisposedException after Dispose.</summary>
        public bool TryAllow(out Permit permit, out BreakerOpenException refusal)
        {
            RefusalC r;
            if (Admit(out permit, out r))
            {
                refusal = null;
                return true;
            }
            refusal = Refusal(r);
            return false;
        }

        /// <summary>Admits the call (true, with its permit) or refuses it (false and a null
        /// permit), without building the refusal: for callers that do not read when a probe may
        /// go, a refusal costs one read of the refusal block (or one call into the library).
        /// ObjectDisposedException after Dispose.</summary>
        public bool TryAllow(out Permit permit)
        {
            RefusalC r;
            return Admit(out permit, out r);
        }

        /// <summary>Admits the call or throws <see cref="BreakerOpenException"/>.
        /// ObjectDisposedException after Dispose.</summary>
        public Permit Allow()
        {
            Permit p;
            RefusalC r;
            if (!Admit(out p, out r)) throw Refusal(r);
            return p;
        }

        static BreakerOpenException Refusal(RefusalC r)
        {
            return new BreakerOpenException(Units.Opt(r.HasRetryAfter, r.RetryAfterNs), (State)r.State, r.Episode);
        }

        /// <summary>One admission: on the word when it admits, else by the library (true with the
        /// permit, or false with the refusal filled and a null permit).</summary>
        bool Admit(out Permit permit, out RefusalC refusal)
        {
            bool refused;
            uint id;
            ulong w = LoadOrRefuse(out refused, out refusal, out id);
            if (refused)
            {
                permit = null;
                return false;
            }
            if (w != NoWord && Admits(w))
            {
                permit = new Permit(id, (uint)(w >> 32));
                return true;
            }
            Acquire();
            PermitC p;
            uint st;
            try
            {
                st = Native.holdoff_breaker_allow(raw, out p, out refusal);
            }
            finally
            {
                Leave();
            }
            Status.Check(st);
            permit = st == Status.Ok ? new Permit(p) : null;
            return st == Status.Ok;
        }

        /// <summary>Records the outcome of an admitted call, and says what that did. Throws
        /// PermitException for a second record or a permit of another breaker (which stays
        /// usable); ArgumentNullException for a null <paramref name="permit"/>;
        /// ArgumentOutOfRangeException (ParamName delay) for a retry-later with a negative
        /// delay; ObjectDisposedException after Dispose.</summary>
        public unsafe Effect Record(Permit permit, Outcome outcome)
        {
            if (permit == null) throw new ArgumentNullException("permit");
            ulong delayNs = outcome.DelayNs();
            // A clean success: closed in the permit's episode with no failure pending and no flag,
            // so the library's record would change nothing but the permit's flag.
            if (outcome.Kind == OutcomeKind.Success && CleanSuccess(ref permit.Raw) && permit.MarkRecorded())
                return Effect.Counted;
            Acquire();
            return RecordEntered(permit, outcome, delayNs, true);
        }

        /// <summary>The library's record of <paramref name="outcome"/> on <paramref name="permit"/>
        /// (<paramref name="delayNs"/>: its delay in ns), inside a section entered by the caller
        /// (<see cref="Acquire"/>), which this leaves when <paramref name="leave"/>. Throws what
        /// <see cref="Record"/> throws for the library's refusal.</summary>
        Effect RecordEntered(Permit permit, Outcome outcome, ulong delayNs, bool leave)
        {
            uint st, effect;
            try
            {
                st = Native.holdoff_breaker_record(raw, ref permit.Raw, (uint)outcome.Kind, delayNs, out effect);
            }
            finally
            {
                if (leave) Leave();
            }
            Status.Check(st);
            return (Effect)effect;
        }

        /// <summary>Records what a call of <see cref="ExecuteAsync"/> came to. With
        /// <paramref name="held"/> the call holds the native breaker (entered when admitted, left by
        /// the caller), so the outcome is recorded even after Dispose; otherwise, after Dispose the
        /// outcome is not recorded and this returns quietly: the caller gets what the function
        /// came to, not ObjectDisposedException.</summary>
        void Finish(Permit permit, Outcome outcome, bool held)
        {
            ulong delayNs = outcome.DelayNs();
            if (outcome.Kind == OutcomeKind.Success && CleanSuccess(ref permit.Raw) && permit.MarkRecorded()) return;
            if (!held && Interlocked.Increment(ref gate) < 0)
            {
                Leave();
                return;
            }
            RecordEntered(permit, outcome, delayNs, !held);
        }

        /// <summary>One call through the breaker, no retries: throws <see cref="BreakerOpenException"/>
        /// when refused, otherwise runs <paramref name="fn"/> with <paramref name="ct"/> and records
        /// what it came to (an exception as <see cref="Outcome.Classify"/> says; the cancellation of
        /// <paramref name="ct"/>, and a programming error, as cancelled, which moves nothing), then
        /// rethrows its exception unchanged. Every exception but ArgumentNullException (for a null
        /// <paramref name="fn"/>) is in the returned task. A call admitted on the fast-path word
        /// whose task is already complete and successful costs no allocation. Dispose while
        /// <paramref name="fn"/> runs does not change what the task comes to (fn's success or
        /// exception); the outcome is still recorded when the library admitted the call (a probe
        /// among them), not when the word did.</summary>
        public Task ExecuteAsync(Func<CancellationToken, Task> fn, CancellationToken ct = default(CancellationToken))
        {
            if (fn == null) throw new ArgumentNullException("fn");
            bool refused;
            RefusalC r;
            uint id;
            ulong w = LoadOrRefuse(out refused, out r, out id);
            if (refused) return Task.FromException(Refusal(r));
            if (w == NoWord || !Admits(w)) return Protect(null, fn, null, null, ct);
            uint episode = (uint)(w >> 32);
            Task t;
            try
            {
                t = fn(ct);
            }
            catch (Exception e)
            {
                return Protect(new Permit(id, episode), null, null, ExceptionDispatchInfo.Capture(e), ct);
            }
            if (t == null || t.Status != TaskStatus.RanToCompletion)
                return Protect(new Permit(id, episode), null, t, null, ct);
            if (Load() != (ulong)episode << 32)
            {
                try
                {
                    Finish(new Permit(id, episode), Outcome.Success, false);
                }
                catch (Exception e)
                {
                    // The library refused the record: in the task, as for every other exception.
                    return Task.FromException(e);
                }
            }
            return Task.CompletedTask;
        }

        /// <summary>ExecuteAsync's path through the async machinery: admits through the library
        /// when <paramref name="p"/> is null; runs <paramref name="fn"/> unless it already ran
        /// (null), having returned <paramref name="started"/> or thrown <paramref name="thrown"/>.</summary>
        async Task Protect(Permit p, Func<CancellationToken, Task> fn, Task started, ExceptionDispatchInfo thrown, CancellationToken ct)
        {
            // A permit of the library (perhaps a probe) holds the native breaker for the whole
            // call, so that its outcome is recorded even if Dispose comes meanwhile: a probe is
            // never left held. One of the word is not held (that would cost the healthy path two
            // interlocked operations); it is never a probe.
            bool held = p == null;
            if (held) p = AdmitHeld();
            try
            {
                try
                {
                    if (thrown != null) thrown.Throw();
                    await (fn != null ? fn(ct) : started).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    Outcome o;
                    Finish(p, Errors.Judge(e, ct, null, out o) == AttemptedC.Raised ? o : Outcome.Cancelled, held);
                    throw;
                }
                Finish(p, Outcome.Success, held);
            }
            finally
            {
                if (held) Leave();
            }
        }

        /// <summary>Admits a call through the library and returns its permit inside a section
        /// entered by <see cref="Acquire"/> (the caller leaves it, once the call is recorded).
        /// Throws BreakerOpenException when refused, ObjectDisposedException after Dispose (no
        /// section left entered either way).</summary>
        Permit AdmitHeld()
        {
            Acquire();
            PermitC p;
            RefusalC r;
            uint st;
            try
            {
                st = Native.holdoff_breaker_allow(raw, out p, out r);
                Status.Check(st);
            }
            catch
            {
                Leave();
                throw;
            }
            if (st == Status.Ok) return new Permit(p);
            Leave();
            throw Refusal(r);
        }

        /// <summary>The breaker's state and counters, read at once; side-effect free.</summary>
        public Snapshot Snapshot()
        {
            SnapshotC s;
            uint st;
            Acquire();
            try
            {
                st = Native.holdoff_breaker_snapshot(raw, out s);
            }
            finally
            {
                Leave();
            }
            Status.Check(st);
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
                uint st;
                Acquire();
                try
                {
                    st = Native.holdoff_breaker_drain_events(raw, buf, (UIntPtr)buf.Length, out n);
                }
                finally
                {
                    Leave();
                }
                Status.Check(st);
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
            uint st;
            Acquire();
            try
            {
                st = Native.holdoff_breaker_metrics(raw, out list);
            }
            finally
            {
                Leave();
            }
            Status.Check(st);
            return MetricReading.Read(list);
        }

        /// <summary>Refuses every call until <see cref="Reset"/> (an operator's act; a new episode).</summary>
        public void ForceOpen() { Act(Native.holdoff_breaker_force_open); }

        /// <summary>Admits every call and never trips until <see cref="Reset"/> (a new episode).</summary>
        public void Disable() { Act(Native.holdoff_breaker_disable); }

        /// <summary>Closes the breaker with its counts cleared (a new episode).</summary>
        public void Reset() { Act(Native.holdoff_breaker_reset); }

        /// <summary>One operator's act on the native breaker.</summary>
        void Act(Func<IntPtr, uint> act)
        {
            uint st;
            Acquire();
            try
            {
                st = act(raw);
            }
            finally
            {
                Leave();
            }
            Status.Check(st);
        }
    }
}
