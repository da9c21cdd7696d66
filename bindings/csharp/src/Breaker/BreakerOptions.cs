using System;

namespace Holdoff
{
    /// <summary>A breaker's configuration; a new instance holds the core's defaults. The core
    /// checks every value when the breaker is built: <see cref="InvalidConfigException"/> names
    /// the property and the field (breaker.open_interval.initial, ...).</summary>
    public sealed class BreakerOptions
    {
        TripPolicy trip;
        BackoffOptions openInterval;

        /// <summary>When the breaker trips; by default 5 consecutive failures. Never null
        /// (ArgumentNullException).</summary>
        public TripPolicy Trip
        {
            get { return trip; }
            set { trip = value ?? throw new ArgumentNullException(nameof(value)); }
        }

        /// <summary>The interval between probes while open: constant, or growing with a cap and
        /// optional jitter, never giving up; by default 30 s doubling to 5 min, no jitter. Never
        /// null (ArgumentNullException).</summary>
        public BackoffOptions OpenInterval
        {
            get { return openInterval; }
            set { openInterval = value ?? throw new ArgumentNullException(nameof(value)); }
        }

        /// <summary>Consecutive answers to current-episode probes needed to close, 1..1000
        /// (default 3).</summary>
        public int Recoveries { get; set; }

        /// <summary>Probes admitted per interval, 1..1000 (default 1).</summary>
        public int MaxProbesInFlight { get; set; }

        /// <summary>How long an unanswered probe holds its slot (greater than zero); null (the
        /// default): the open interval in force when the probe was admitted.</summary>
        public TimeSpan? ProbeTimeout { get; set; }

        /// <summary>The guard on an upstream's retry-later delay: a longer delay opens the breaker
        /// for this long instead (the state change says so); greater than zero, 300 s by
        /// default.</summary>
        public TimeSpan MaxRetryLater { get; set; }

        /// <summary>The seed of the jitter's pseudo-random sequence.</summary>
        public ulong Seed { get; set; }

        /// <summary>The fleet this breaker shares (<see cref="FleetOptions"/>); null (the default):
        /// a local breaker. A group refuses a template with a fleet (InvalidConfigException, field
        /// fleet): groups stay local.</summary>
        public FleetOptions Fleet { get; set; }

        /// <summary>The core's defaults.</summary>
        public BreakerOptions()
        {
            var d = CoreDefaults.Part("breaker");
            trip = TripPolicy.ConsecutiveFailures(CoreDefaults.Int(d.Get("trip"), "threshold"));
            openInterval = CoreDefaults.Backoff(d.Get("open_interval"));
            Recoveries = CoreDefaults.Int(d, "recoveries");
            MaxProbesInFlight = CoreDefaults.Int(d, "max_probes_in_flight");
            ProbeTimeout = CoreDefaults.OptSpan(d, "probe_timeout_ms");
            MaxRetryLater = CoreDefaults.Span(d, "max_retry_later_ms");
            Seed = CoreDefaults.Seed(d);
        }
    }
}
