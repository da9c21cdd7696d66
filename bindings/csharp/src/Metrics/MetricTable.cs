using System.Collections.Generic;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The metric table (docs/metrics.md): every series a <see cref="Breaker"/>, a
    /// <see cref="Policy"/>, a <see cref="RetryQuota"/> and a <see cref="BreakerGroup"/> report,
    /// read once from the C library.</summary>
    public static class MetricTable
    {
        static readonly IReadOnlyList<MetricDef> all = Load();

        static IReadOnlyList<MetricDef> Load()
        {
            Library.EnsureCompatible();
            var defs = new MetricDef[Native.holdoff_metric_count()];
            for (uint i = 0; i < defs.Length; i++) defs[i] = new MetricDef(i);
            return System.Array.AsReadOnly(defs);
        }

        /// <summary>Every metric, in the core's order (a <see cref="MetricDef.Code"/> indexes it).</summary>
        public static IReadOnlyList<MetricDef> All { get { return all; } }
    }
}
