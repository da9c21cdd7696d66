namespace Holdoff.Interop
{
    /// <summary>A holdoff_policy*, released by holdoff_policy_free.</summary>
    internal sealed class PolicyHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_policy_free(handle) == 0; }
    }
}
