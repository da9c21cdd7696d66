using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Globalization;
using System.Linq;
using System.Runtime.InteropServices;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>One series' value, read from the core's counters by <see cref="Breaker.Metrics"/>,
    /// <see cref="Policy.Metrics"/>, <see cref="RetryQuota.Metrics"/> or
    /// <see cref="BreakerGroup.Metrics"/>.</summary>
    public sealed class MetricReading
    {
        static readonly IReadOnlyDictionary<string, string> None =
            new ReadOnlyDictionary<string, string>(new Dictionary<string, string>());

        /// <summary>The metric's name (<c>holdoff.breaker.outcomes</c>).</summary>
        public string Name { get { return Metric.Name; } }

        /// <summary>The series' attributes: the metric's own (<c>outcome</c> = <c>failure</c>)
        /// and, in a group's readings, <c>upstream</c> = the breaker's key. Empty for a series
        /// without any.</summary>
        public IReadOnlyDictionary<string, string> Attributes { get; }

        /// <summary>The value in the metric's unit: a count (cumulative since the object's first
        /// read) for a counter, the current value for a gauge (1 or 0 for a state), seconds for
        /// <c>holdoff.retry.wait.duration</c>.</summary>
        public double Value { get; }

        /// <summary>The metric's row of <see cref="MetricTable.All"/> (kind, unit, description).</summary>
        public MetricDef Metric { get; }

        /// <summary>The series as <c>name</c> or <c>name{key=value,...}</c>, attributes sorted by
        /// key (<c>holdoff.breaker.state{state=open,upstream=payments}</c>).</summary>
        public string Series
        {
            get
            {
                if (Attributes.Count == 0) return Name;
                // Attributes enumerates in key order (a SortedDictionary underneath).
                return Name + "{" + string.Join(",", Attributes.Select(a => a.Key + "=" + a.Value)) + "}";
            }
        }

        MetricReading(MetricDef metric, IReadOnlyDictionary<string, string> attributes, double value)
        {
            Metric = metric;
            Attributes = attributes;
            Value = value;
        }

        /// <summary><see cref="Series"/> and <see cref="Value"/>.</summary>
        public override string ToString() { return Series + " " + Value.ToString("R", CultureInfo.InvariantCulture); }

        /// <summary>The readings of <paramref name="list"/>, which this frees.</summary>
        internal static IReadOnlyList<MetricReading> Read(MetricListHandle list)
        {
            using (list)
            {
                var table = MetricTable.All;
                var readings = new MetricReading[(int)(ulong)Native.holdoff_metric_list_len(list)];
                for (int i = 0; i < readings.Length; i++)
                {
                    MetricSampleC s;
                    Status.Check(Native.holdoff_metric_list_get(list, (UIntPtr)i, out s));
                    var metric = table[(int)s.Metric];
                    var attributes = None;
                    if (s.Attribute != MetricSampleC.NoAttribute || s.Upstream != IntPtr.Zero)
                    {
                        var a = new SortedDictionary<string, string>(StringComparer.Ordinal);
                        if (s.Attribute != MetricSampleC.NoAttribute) a[metric.Attribute] = metric.Values[(int)s.Attribute];
                        if (s.Upstream != IntPtr.Zero) a["upstream"] = Utf8(s.Upstream);
                        attributes = new ReadOnlyDictionary<string, string>(a);
                    }
                    readings[i] = new MetricReading(metric, attributes, s.Value);
                }
                return Array.AsReadOnly(readings);
            }
        }

        /// <summary>A NUL-terminated UTF-8 string the list owns, copied.</summary>
        static string Utf8(IntPtr p)
        {
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            var b = new byte[n];
            Marshal.Copy(p, b, 0, n);
            return Encoding.UTF8.GetString(b);
        }
    }
}
