namespace Holdoff.Interop
{
    /// <summary>A holdoff_retry_quota*, released by holdoff_retry_quota_free.</summary>
    internal sealed class RetryQuotaHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_retry_quota_free(handle) == 0; }
    }
}
