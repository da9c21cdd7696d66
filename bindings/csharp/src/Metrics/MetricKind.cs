namespace Holdoff
{
    /// <summary>Whether a metric is a cumulative count or a value read as it is
    /// (<see cref="MetricDef.Kind"/>).</summary>
    public enum MetricKind
    {
        /// <summary>Monotonic, cumulative since counting started (an observable counter, a
        /// Prometheus counter).</summary>
        Counter = 0,
        /// <summary>The current value (an observable gauge, a Prometheus gauge).</summary>
        Gauge = 1,
    }
}
