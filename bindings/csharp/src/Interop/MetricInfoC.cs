using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_metric_info (include/holdoff.h), field for field: static strings.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct MetricInfoC
    {
        public IntPtr Name, Unit, Description, Attribute;
        public uint Kind, ValueCount;
    }
}
