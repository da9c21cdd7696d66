namespace Holdoff.Interop
{
    /// <summary>holdoff_step_kind.</summary>
    internal enum StepKindC : uint { Attempt = 0, Wait = 1, Finish = 2 }
}
