using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_header (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct HeaderC
    {
        public IntPtr Name;
        public UIntPtr NameLen;
        public IntPtr Value;
        public UIntPtr ValueLen;
    }
}
