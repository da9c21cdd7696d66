using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
    /// <summary>holdoff_step (include/holdoff.h), field for field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct StepC
    {
        public ulong TimeLimitNs, DelayNs, ServerDelayNs, RetryAfterNs, LastRetryLaterNs;
        public uint Kind, Attempts, Source, Verdict, Reason, LastOutcome;
        public byte Probe, Capped, HasTimeLimit, HasServerDelay, HasRetryAfter, HasReason, HasLastOutcome, Reserved;
    }
}
