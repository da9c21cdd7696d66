namespace Holdoff.Interop
{
    /// <summary>A holdoff_policy_call*, released by holdoff_policy_call_free.</summary>
    internal sealed class PolicyCallHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_policy_call_free(handle) == 0; }
    }
}
