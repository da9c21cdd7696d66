using System;

namespace Holdoff
{
    /// <summary>When a closed breaker trips (<see cref="BreakerOptions.Trip"/>). The core checks
    /// the values when the breaker is built: <see cref="InvalidConfigException"/> names the
    /// factory's parameter and the field (breaker.trip.threshold, breaker.trip.window, ...).</summary>
    public sealed class TripPolicy
    {
        internal readonly string Kind;
        internal readonly int Threshold, MinCalls, Buckets;
        internal readonly double Rate;
        internal readonly TimeSpan Window;

        TripPolicy(string kind, int threshold, double rate, int minCalls, TimeSpan window, int buckets)
        {
            Kind = kind;
            Threshold = threshold;
            Rate = rate;
            MinCalls = minCalls;
            Window = window;
            Buckets = buckets;
        }

        /// <summary>Trips after <paramref name="n"/> failures in a row (1..1 000 000).</summary>
        public static TripPolicy ConsecutiveFailures(int n)
        {
            return new TripPolicy("consecutive", n, 0, 0, TimeSpan.Zero, 0);
        }

        /// <summary>Trips after <paramref name="n"/> failures (1..1 000 000) inside a rolling
        /// <paramref name="window"/> (greater than zero).</summary>
        public static TripPolicy FailuresInWindow(int n, TimeSpan window)
        {
            return new TripPolicy("window", n, 0, 0, window, 0);
        }

        /// <summary>Trips when the failure rate, in (0, 1], is reached over a rolling
        /// <paramref name="window"/> (greater than zero) of <paramref name="buckets"/> buckets
        /// (1..1000, no more than the window in nanoseconds; 0 takes the core's default, 10), once
        /// <paramref name="minCalls"/> calls (1..1 000 000) were seen in it.</summary>
        public static TripPolicy FailureRate(double rate, int minCalls, TimeSpan window, int buckets = 0)
        {
            return new TripPolicy("rate", 0, rate, minCalls, window, buckets);
        }
    }
}
