namespace Holdoff.Interop
{
    /// <summary>A holdoff_clock*, released by holdoff_clock_free.</summary>
    internal sealed class ClockHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_clock_free(handle) == 0; }
    }
}
