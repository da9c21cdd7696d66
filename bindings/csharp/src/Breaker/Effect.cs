using System;

namespace Holdoff
{
    /// <summary>What recording an outcome did.</summary>
    public enum Effect : uint { Counted = 0, Stale = 1, Ignored = 2 }
}
