namespace Holdoff.Interop
{
    /// <summary>A holdoff_config*, released by holdoff_config_free.</summary>
    internal sealed class ConfigHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_config_free(handle) == 0; }
    }
}
