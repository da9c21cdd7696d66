namespace Holdoff.Interop
{
    /// <summary>A holdoff_classifier*, released by holdoff_classifier_free.</summary>
    internal sealed class ClassifierHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_classifier_free(handle) == 0; }
    }
}
