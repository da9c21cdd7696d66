namespace Holdoff.Interop
{
    /// <summary>A holdoff_key_list*, released by holdoff_key_list_free.</summary>
    internal sealed class KeyListHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_key_list_free(handle) == 0; }
    }
}
