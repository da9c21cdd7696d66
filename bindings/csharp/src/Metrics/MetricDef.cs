using System;
using System.Collections.Generic;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>One row of the metric table (<see cref="MetricTable.All"/>, docs/metrics.md), as
    /// the C library describes it: the binding restates none of it.</summary>
    public sealed class MetricDef
    {
        /// <summary>The metric's code: its index in <see cref="MetricTable.All"/>.</summary>
        public int Code { get; }

        /// <summary>OpenTelemetry name, <c>holdoff.&lt;object&gt;.&lt;what&gt;</c>
        /// (<c>holdoff.breaker.refused</c>).</summary>
        public string Name { get; }

        /// <summary>Counter or gauge.</summary>
        public MetricKind Kind { get; }

        /// <summary>UCUM unit: <c>s</c> (durations, in seconds), <c>1</c>, or an annotation such
        /// as <c>{call}</c>.</summary>
        public string Unit { get; }

        /// <summary>What it counts, one sentence.</summary>
        public string Description { get; }

        /// <summary>The metric's own attribute key (<c>state</c>, <c>outcome</c>, <c>reason</c>,
        /// <c>source</c>), or null when it has none.</summary>
        public string Attribute { get; }

        /// <summary>That attribute's values, in the core's order (empty without an attribute).</summary>
        public IReadOnlyList<string> Values { get; }

        internal MetricDef(uint code)
        {
            MetricInfoC info;
            Status.Check(Native.holdoff_metric_describe(code, out info));
            Code = (int)code;
            Name = Native.Str(info.Name);
            Kind = (MetricKind)info.Kind;
            Unit = Native.Str(info.Unit);
            Description = Native.Str(info.Description);
            Attribute = Native.Str(info.Attribute);
            var values = new string[info.ValueCount];
            for (uint i = 0; i < info.ValueCount; i++) values[i] = Native.Str(Native.holdoff_metric_attribute_value(code, i));
            Values = Array.AsReadOnly(values);
        }

        /// <summary>The name.</summary>
        public override string ToString() { return Name; }
    }
}
