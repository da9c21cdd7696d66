// P/Invoke declarations of include/holdoff.h and the SafeHandle of every opaque type.
// Only blittable signatures: integers, IntPtr, byte for uint8_t, and structs of those.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

// The API tests check these structs' sizes and offsets against the C header's.
[assembly: InternalsVisibleTo("ApiTests")]

namespace Holdoff.Interop
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct PermitC
    {
        public uint Episode;
        public byte Probe;
        public byte Recorded;
        public ushort Reserved;
        public uint RawBreaker;
        public uint RawEpisode;
        public uint RawProbe;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct RefusalC
    {
        public ulong RetryAfterNs;
        public uint State;
        public uint Episode;
        public byte HasRetryAfter;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct SnapshotC
    {
        public ulong Failures, RetryAfterNs, IntervalNs, Opens, Closes, Probes, Refusals, StaleAnswers, EventsDropped;
        public uint State, Episode, Recoveries, ProbesInFlight;
        public byte HasRetryAfter, ProbeReady, HasInterval;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct EventC
    {
        public ulong AtNs, RequestedDelayNs, OpenForNs;
        public uint From, To, Episode, Reason;
        public byte HasRequestedDelay, HasOpenFor;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct DecisionC
    {
        public ulong DelayNs, ServerDelayNs;
        public uint Kind, Source, Reason;
        public byte Capped, HasServerDelay;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct EpisodeC
    {
        public ulong StartNs;
        public byte Active;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct RetryAfterC
    {
        public ulong DelayNs;
        public uint Unusable;
        public uint Source;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct HeaderC
    {
        public IntPtr Name;
        public UIntPtr NameLen;
        public IntPtr Value;
        public UIntPtr ValueLen;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ClassificationC
    {
        public ulong RetryLaterNs;
        public RetryAfterC Hint;
        public uint Outcome;
        public byte ShouldRetry, HasShouldRetry;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct BeforeC
    {
        public ulong DelayNs, RetryAfterNs;
        public uint Action, Reason;
        public byte HasRetryAfter;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct QuotaLeaseC
    {
        public ulong Cost, Available;
        public byte Acquired, Returned;
        public ushort Reserved;
        public uint RawQuota;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct BreakerOptionsC
    {
        public UIntPtr StructSize;
        public uint TripPolicy, TripThreshold, TripMinCalls, TripBuckets;
        public double TripRate;
        public ulong TripWindowNs, OpenInitialNs;
        public double OpenMultiplier;
        public ulong OpenMaxNs;
        public double OpenJitter;
        public uint Recoveries, MaxProbesInFlight;
        public ulong ProbeTimeoutNs, MaxRetryLaterNs, Seed;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct BudgetOptionsC
    {
        public UIntPtr StructSize;
        public ulong MaxRateLimitDurationNs, RetryAfterCapNs, BackoffInitialNs;
        public double BackoffMultiplier;
        public ulong BackoffMaxNs;
        public double BackoffJitter;
        public ulong MaxBackoffDurationNs, Seed;
        public uint MaxRetries;
        public byte GiveUpAboveCap;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct GroupStatsC
    {
        public UIntPtr Keys, MaxKeys;
        public ulong Evictions, Overflows;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct QuotaOptionsC
    {
        public UIntPtr StructSize;
        public ulong Capacity, RetryCost, TimeoutCost, SuccessRefill;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ExecutionOptionsC
    {
        public UIntPtr StructSize;
        public ulong AttemptTimeoutNs, TotalTimeoutNs;
        public uint AttemptTimeout, TotalTimeout;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct StepC
    {
        public ulong TimeLimitNs, DelayNs, ServerDelayNs, RetryAfterNs, LastRetryLaterNs;
        public uint Kind, Attempts, Source, Verdict, Reason, LastOutcome;
        public byte Probe, Capped, HasTimeLimit, HasServerDelay, HasRetryAfter, HasReason, HasLastOutcome, Reserved;
    }

    /// <summary>holdoff_limit.</summary>
    internal enum LimitC : uint { Default = 0, None = 1, Set = 2 }

    /// <summary>holdoff_step_kind.</summary>
    internal enum StepKindC : uint { Attempt = 0, Wait = 1, Finish = 2 }

    /// <summary>holdoff_attempted.</summary>
    internal enum AttemptedC : uint { Returned = 0, Raised = 1, Cancelled = 2, Bug = 3 }

    /// <summary>holdoff_verdict.</summary>
    internal enum VerdictC : uint { Return = 0, Rethrow = 1, BreakerOpen = 2, GiveUp = 3, Cancelled = 4, InvalidInput = 5 }

    /// <summary>A handle of the C library, released exactly once by its _free function.</summary>
    internal abstract class HoldoffHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        protected HoldoffHandle() : base(true) { }
    }

    internal sealed class ClockHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_clock_free(handle) == 0; }
    }

    internal sealed class ConfigHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_config_free(handle) == 0; }
    }

    internal sealed class BreakerHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_breaker_free(handle) == 0; }
    }

    internal sealed class GroupHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_group_free(handle) == 0; }
    }

    internal sealed class KeyListHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_key_list_free(handle) == 0; }
    }

    internal sealed class BudgetHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_budget_free(handle) == 0; }
    }

    internal sealed class RetryStateHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_retry_state_free(handle) == 0; }
    }

    internal sealed class QuotaHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_quota_free(handle) == 0; }
    }

    internal sealed class ClassifierHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_classifier_free(handle) == 0; }
    }

    internal sealed class PolicyHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_policy_free(handle) == 0; }
    }

    internal sealed class PolicyCallHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_policy_call_free(handle) == 0; }
    }

    /// <summary>Freed during an attempt, the C library records that attempt as cancelled (a probe
    /// frees its slot at once), or as a timeout past its time limit.</summary>
    internal sealed class ExecutionHandle : HoldoffHandle
    {
        protected override bool ReleaseHandle() { return Native.holdoff_execution_free(handle) == 0; }
    }

    internal static class Native
    {
        private const string Lib = "holdoff";
        private const CallingConvention Cc = CallingConvention.Cdecl;

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_abi_version();
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_version();
        [DllImport(Lib, CallingConvention = Cc)] public static extern ulong holdoff_debug_live_handles();
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_status_message(uint status);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_status_name(uint status);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_last_error_message();
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_last_error_field();
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_debug_panic();

        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_state_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_outcome_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_effect_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_reason_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_decision_kind_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_wait_source_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_give_up_reason_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_unusable_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_hint_source_name(uint v);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_before_action_name(uint v);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_new_system(out ClockHandle clock);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_new_manual(ulong wallOriginUnixNs, out ClockHandle clock);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_free(IntPtr clock);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_now(ClockHandle clock, out ulong ns);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_wall_now(ClockHandle clock, out ulong unixNs);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_set(ClockHandle clock, ulong toNs);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_clock_advance(ClockHandle clock, ulong byNs);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_parse(byte[] json, UIntPtr len, out ConfigHandle config);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_free(IntPtr config);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_parts(ConfigHandle config, out uint parts);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_new_breaker(ConfigHandle config, ClockHandle clock, out BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_new_group(ConfigHandle config, ClockHandle clock, out GroupHandle group);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_new_budget(ConfigHandle config, ClockHandle clock, out BudgetHandle budget);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_new_quota(ConfigHandle config, out QuotaHandle quota);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_new_classifier(ConfigHandle config, out ClassifierHandle classifier);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_options_init(out BreakerOptionsC options);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_budget_options_init(out BudgetOptionsC options);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_quota_options_init(out QuotaOptionsC options);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_free(IntPtr breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_allow(BreakerHandle breaker, out PermitC permit, out RefusalC refusal);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_record(BreakerHandle breaker, ref PermitC permit, uint outcome, ulong retryLaterNs, out uint effect);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_snapshot(BreakerHandle breaker, out SnapshotC snapshot);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_drain_events(BreakerHandle breaker, [Out] EventC[] events, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_force_open(BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_disable(BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_reset(BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_free(IntPtr group);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_get(GroupHandle group, byte[] key, UIntPtr keyLen, out BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_len(GroupHandle group, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_new_with_max_keys(ref BreakerOptionsC template, UIntPtr maxKeys, ClockHandle clock, out GroupHandle group);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_snapshot(GroupHandle group, out GroupStatsC stats);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_group_keys(GroupHandle group, out KeyListHandle keys);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_free(IntPtr keys);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_len(KeyListHandle keys, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_get(KeyListHandle keys, UIntPtr index, out IntPtr key, out UIntPtr keyLen);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_budget_free(IntPtr budget);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_budget_decide(BudgetHandle budget, RetryStateHandle state, uint outcome, ulong retryLaterNs, out DecisionC decision);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_budget_episode(BudgetHandle budget, out EpisodeC episode);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_new(out RetryStateHandle state);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_free(IntPtr state);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_retries(RetryStateHandle state, out uint retries);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_quota_free(IntPtr quota);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_quota_acquire(QuotaHandle quota, byte afterTimeout, out QuotaLeaseC lease);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_quota_on_success(QuotaHandle quota, ref QuotaLeaseC lease);
        [DllImport(Lib, CallingConvention = Cc, EntryPoint = "holdoff_quota_on_success")] public static extern uint holdoff_quota_on_success_no_lease(QuotaHandle quota, IntPtr lease);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_quota_available(QuotaHandle quota, out ulong available);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_parse_retry_after(byte[] value, UIntPtr len, ulong wallNowUnixNs, out RetryAfterC result);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_hint_from_headers(HeaderC[] headers, UIntPtr n, ulong wallNowUnixNs, out RetryAfterC result);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_classifier_free(IntPtr classifier);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_classifier_classify(ClassifierHandle classifier, long status, HeaderC[] headers, UIntPtr n, ulong wallNowUnixNs, out ClassificationC result);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_new(BreakerHandle breaker, BudgetHandle budget, QuotaHandle quota, ClassifierHandle classifier, out PolicyHandle policy);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_free(IntPtr policy);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_new(out PolicyCallHandle call);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_free(IntPtr call);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_attempts(PolicyCallHandle call, out uint attempts);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_before(PolicyHandle policy, PolicyCallHandle call, out BeforeC before, out PermitC permit);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_after(PolicyHandle policy, PolicyCallHandle call, ref PermitC permit, uint outcome, ulong retryLaterNs, out DecisionC decision);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_after_response(PolicyHandle policy, PolicyCallHandle call, ref PermitC permit, long status, HeaderC[] headers, UIntPtr n, out DecisionC decision, out ClassificationC classification);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_config_execution_options(ConfigHandle config, out ExecutionOptionsC options);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_options_init(out ExecutionOptionsC options);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_new(PolicyHandle policy, ref ExecutionOptionsC options, out ExecutionHandle execution);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_free(IntPtr execution);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_next_step(ExecutionHandle execution, out StepC step);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_complete(ExecutionHandle execution, uint attempted, uint outcome, ulong retryLaterNs, out StepC step);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_complete_response(ExecutionHandle execution, long status, HeaderC[] headers, UIntPtr n, out StepC step);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_cancel(ExecutionHandle execution, out StepC step);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_execution_stop(ExecutionHandle execution, out StepC step);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_verdict_name(uint v);

        public static string Str(IntPtr p) { return p == IntPtr.Zero ? null : Marshal.PtrToStringAnsi(p); }
    }
}
