using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
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
        internal readonly BreakerGroupHandle Handle;
        static readonly Encoding StrictUtf8 = new UTF8Encoding(false, true);

        internal BreakerGroup(BreakerGroupHandle h) { Handle = h; }

        /// <summary>An empty group whose breakers are built from <paramref name="template"/> and
        /// read <paramref name="clock"/> (the system clock when null). <paramref name="maxKeys"/>
        /// bounds the breakers kept, 1..100 000 000; null takes the core's default (10 000).
        /// Throws InvalidConfigException (an ArgumentException) naming the invalid property and
        /// field: the template's, or maxKeys (group.max_keys); ArgumentNullException for a null
        /// <paramref name="template"/>.</summary>
        public BreakerGroup(BreakerOptions template, Clock clock = null, int? maxKeys = null)
        {
            if (template == null) throw new ArgumentNullException(nameof(template));
            Handle = new ConfigJson().Breaker(template).Group(maxKeys).Build(c => c.NewBreakerGroup(clock)).Handle;
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
            Status.Check(Native.holdoff_breaker_group_get(Handle, k, (UIntPtr)k.Length, out h));
            return new Breaker(h);
        }

        /// <summary>The number of breakers the group keeps (overflow breakers are not kept).</summary>
        public int Count
        {
            get
            {
                UIntPtr n;
                Status.Check(Native.holdoff_breaker_group_len(Handle, out n));
                return (int)(ulong)n;
            }
        }

        /// <summary>The most breakers the group keeps (1..100 000 000).</summary>
        public int MaxKeys { get { return Snapshot().MaxKeys; } }

        /// <summary>The group's counts (breakers kept, MaxKeys, evictions, overflows), read
        /// together. Side-effect free: marks no key used.</summary>
        public GroupSnapshot Snapshot()
        {
            GroupSnapshotC s;
            Status.Check(Native.holdoff_breaker_group_snapshot(Handle, out s));
            return new GroupSnapshot(s);
        }

        /// <summary>The keys the group keeps now, sorted by their UTF-8 bytes (a copy). Side-effect
        /// free: marks no key used.</summary>
        public IReadOnlyList<string> Keys()
        {
            KeyListHandle list;
            Status.Check(Native.holdoff_breaker_group_keys(Handle, out list));
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

        /// <summary>The group's series (<see cref="MetricTable.All"/>, docs/metrics.md), zeros
        /// included: <c>holdoff.group.keys</c> (a gauge) and <c>holdoff.group.evictions</c>
        /// without an upstream, then every kept breaker's series (as
        /// <see cref="Breaker.Metrics"/>) with the attribute <c>upstream</c> = its key, keys in
        /// <see cref="Keys"/> order. The first read starts counting on every breaker the group
        /// keeps or makes from then on; overflow breakers are not reported. Marks no key used.
        /// ObjectDisposedException after Dispose.</summary>
        public IReadOnlyList<MetricReading> Metrics()
        {
            MetricListHandle list;
            Status.Check(Native.holdoff_breaker_group_metrics(Handle, out list));
            return MetricReading.Read(list);
        }

        /// <summary>Releases the group. Breakers obtained from it stay valid (each is released by
        /// its own Dispose).</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
