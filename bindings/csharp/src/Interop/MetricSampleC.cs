using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_metric_sample (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MetricSampleC
    {
        /// <summary>HOLDOFF_METRIC_NO_ATTRIBUTE: the metric has no attribute of its own.</summary>
        public const uint NoAttribute = uint.MaxValue;

        public uint Metric, Attribute;
        public double Value;
        /// <summary>NULL, or a group breaker's key (NUL-terminated UTF-8, owned by the list).</summary>
        public IntPtr Upstream;
    }
}
