namespace Holdoff.Interop
{
    /// <summary>holdoff_attempted.</summary>
    internal enum AttemptedC : uint { Returned = 0, Raised = 1, Cancelled = 2, Bug = 3 }
}
