using System;

namespace Holdoff
{
    /// <summary>What happened to a call.</summary>
    public enum OutcomeKind : uint { Success = 0, Answer = 1, Failure = 2, Timeout = 3, RetryLater = 4, Cancelled = 5 }
}
