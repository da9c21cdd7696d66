namespace Holdoff.Interop
{
    /// <summary>holdoff_verdict.</summary>
    internal enum VerdictC : uint { Return = 0, Rethrow = 1, BreakerOpen = 2, GiveUp = 3, Cancelled = 4, InvalidInput = 5 }
}
