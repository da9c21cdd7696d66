namespace Holdoff.Interop
{
    /// <summary>A holdoff_retry_state*, released by holdoff_retry_state_free.</summary>
    internal sealed class RetryStateHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_retry_state_free(handle) == 0; }
    }
}
