namespace Holdoff.Interop
{
    /// <summary>Freed during an attempt, the C library records that attempt as cancelled (a probe
    /// frees its slot at once), or as a timeout past its time limit.</summary>
    internal sealed class ExecutionHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_execution_free(handle) == 0; }
    }
}
