using System;

namespace Holdoff
{
    /// <summary>Shares a breaker with every worker that uses the same store and key
    /// (docs/fleet.md): a trip or a retry-later seen by one worker opens the breaker of all of
    /// them, and the fleet sends one probe per interval in total. Calls never wait on the store:
    /// a Redis fleet syncs on a background thread of the native library, started with the
    /// breaker and stopped when the breaker (and every policy using it) is disposed. Set it on
    /// <see cref="BreakerOptions.Fleet"/>. The core checks it when the breaker is built:
    /// InvalidConfigException names the field (fleet.url, fleet.key, fleet.refresh,
    /// fleet.fallback_after, fleet.timeout, fleet.ttl).</summary>
    public sealed class FleetOptions
    {
        /// <summary>The store: <c>redis://[user:password@]host[:port][/db]</c>,
        /// <c>rediss://...</c>, <c>unix:///path/redis.sock[?db=N]</c>, or
        /// <c>memory://name</c> (this process only, no thread: tick it with
        /// <see cref="Breaker.SyncFleet"/>).</summary>
        public string Url { get; set; }

        /// <summary>The shared record's name (the upstream, e.g. "payments-api"): 1..200 bytes, no
        /// whitespace.</summary>
        public string Key { get; set; }

        /// <summary>The period of the background sync; null: the core's default (50 ms).</summary>
        public TimeSpan? Refresh { get; set; }

        /// <summary>How long without a successful sync before the breaker detaches and runs as a
        /// local breaker; null: the core's default (1 s). The next successful sync attaches it
        /// again.</summary>
        public TimeSpan? FallbackAfter { get; set; }

        /// <summary>The bound on one round trip to the store; null: the core's default
        /// (50 ms).</summary>
        public TimeSpan? Timeout { get; set; }

        /// <summary>How long the shared record lives unused; null: the core's default (1 h).</summary>
        public TimeSpan? Ttl { get; set; }

        /// <summary>A fleet on <paramref name="url"/> sharing the record <paramref name="key"/>,
        /// with the core's default durations.</summary>
        public FleetOptions(string url, string key)
        {
            Url = url;
            Key = key;
        }
    }
}
