using System;

namespace Holdoff
{
    /// <summary>The kind of a retry decision.</summary>
    public enum DecisionKind : uint { Done = 0, Retry = 1, GiveUp = 2 }
}
