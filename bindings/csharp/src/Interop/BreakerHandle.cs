namespace Holdoff.Interop
{
    /// <summary>A new holdoff_breaker*, released by holdoff_breaker_free if it is lost before a
    /// <see cref="Breaker"/> takes it over (which then owns it and leaves this handle invalid).</summary>
    internal sealed class BreakerHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_breaker_free(handle) == 0; }
    }
}
