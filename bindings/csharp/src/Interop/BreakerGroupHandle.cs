namespace Holdoff.Interop
{
    /// <summary>A holdoff_breaker_group*, released by holdoff_breaker_group_free.</summary>
    internal sealed class BreakerGroupHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_breaker_group_free(handle) == 0; }
    }
}
