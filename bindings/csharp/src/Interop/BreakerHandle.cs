namespace Holdoff.Interop
{
    /// <summary>A holdoff_breaker*, released by holdoff_breaker_free.</summary>
    internal sealed class BreakerHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_breaker_free(handle) == 0; }
    }
}
