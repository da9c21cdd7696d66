namespace Holdoff.Interop
{
    /// <summary>holdoff_limit.</summary>
    internal enum LimitC : uint { Default = 0, None = 1, Set = 2 }
}
