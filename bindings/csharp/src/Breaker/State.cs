using System;

namespace Holdoff
{
    /// <summary>A breaker's state.</summary>
    public enum State : uint { Closed = 0, Open = 1, HalfOpen = 2, ForcedOpen = 3, Disabled = 4 }
}
