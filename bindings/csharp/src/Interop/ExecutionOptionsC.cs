using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_execution_options (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct ExecutionOptionsC
    {
        public UIntPtr StructSize;
        public ulong AttemptTimeoutNs, TotalTimeoutNs;
        public uint AttemptTimeout, TotalTimeout;
    }
}
