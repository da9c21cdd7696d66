using System;

namespace Holdoff
{
    /// <summary>Why a breaker's state changed.</summary>
    public enum Reason : uint { Tripped, RetryLater, ProbeAdmitted, ProbeFailed, Recovered, ForcedOpen, Disabled, Reset, FleetOpened }
}
