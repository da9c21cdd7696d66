namespace Holdoff.Interop
{
    /// <summary>A holdoff_metric_list*, released by holdoff_metric_list_free.</summary>
    internal sealed class MetricListHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_metric_list_free(handle) == 0; }
    }
}
