using System;

namespace Holdoff
{
    /// <summary>Where a retry's delay came from.</summary>
    public enum WaitSource : uint { RetryAfter = 0, Backoff = 1, Breaker = 2 }
}
