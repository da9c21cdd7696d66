using Microsoft.Win32.SafeHandles;

namespace Holdoff.Interop
{
    /// <summary>A handle of the C library, released exactly once by its _free function.</summary>
    internal abstract class HoldoffHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        protected HoldoffHandle() : base(true) { }
    }
}
