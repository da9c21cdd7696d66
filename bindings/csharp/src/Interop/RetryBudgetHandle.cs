namespace Holdoff.Interop
{
    /// <summary>A holdoff_retry_budget*, released by holdoff_retry_budget_free.</summary>
    internal sealed class RetryBudgetHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_retry_budget_free(handle) == 0; }
    }
}
