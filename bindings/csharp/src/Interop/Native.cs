// P/Invoke declarations of include/holdoff.h. Only blittable signatures: integers, IntPtr,
// byte for uint8_t, and structs of those. A holdoff_breaker* is an IntPtr: Breaker owns it and
// keeps it alive across each call itself (Breaker.Acquire), without a SafeHandle.
using System;
using System.Runtime.InteropServices;

namespace Holdoff.Interop
{
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
        /// <summary>The core's defaults (no configuration) as neutral JSON with every field: a
        /// zero capacity asks for the length only.</summary>
        [DllImport(Lib, CallingConvention = Cc, EntryPoint = "holdoff_config_to_json")] public static extern uint holdoff_config_defaults_to_json(IntPtr noConfig, byte[] buf, UIntPtr capacity, out UIntPtr len);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_new(ConfigHandle config, ClockHandle clock, out BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_new(ConfigHandle config, ClockHandle clock, out BreakerGroupHandle group);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_budget_new(ConfigHandle config, ClockHandle clock, out RetryBudgetHandle budget);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_new(ConfigHandle config, out RetryQuotaHandle quota);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_classifier_new(ConfigHandle config, out ClassifierHandle classifier);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_free(IntPtr breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_allow(IntPtr breaker, out PermitC permit, out RefusalC refusal);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_record(IntPtr breaker, ref PermitC permit, uint outcome, ulong retryLaterNs, out uint effect);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_fast_path(IntPtr breaker, out FastPathC fastPath);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_refusal_path(IntPtr breaker, out RefusalPathC refusalPath);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_snapshot(IntPtr breaker, out SnapshotC snapshot);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_drain_events(IntPtr breaker, [Out] StateChangeC[] events, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_force_open(IntPtr breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_disable(IntPtr breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_reset(IntPtr breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_sync_fleet(IntPtr breaker, out FleetSyncC sync);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_fleet_attached(IntPtr breaker, out byte attached);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_memory_store_control(byte[] name, UIntPtr nameLen, uint action);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_fleet_state_name(uint state);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_free(IntPtr group);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_get(BreakerGroupHandle group, byte[] key, UIntPtr keyLen, out BreakerHandle breaker);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_len(BreakerGroupHandle group, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_snapshot(BreakerGroupHandle group, out GroupSnapshotC stats);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_keys(BreakerGroupHandle group, out KeyListHandle keys);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_free(IntPtr keys);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_len(KeyListHandle keys, out UIntPtr len);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_key_list_get(KeyListHandle keys, UIntPtr index, out IntPtr key, out UIntPtr keyLen);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_budget_free(IntPtr budget);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_budget_decide(RetryBudgetHandle budget, RetryStateHandle state, uint outcome, ulong retryLaterNs, out DecisionC decision);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_budget_episode(RetryBudgetHandle budget, out EpisodeC episode);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_new(out RetryStateHandle state);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_free(IntPtr state);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_state_retries(RetryStateHandle state, out uint retries);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_free(IntPtr quota);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_acquire(RetryQuotaHandle quota, byte afterTimeout, out QuotaLeaseC lease);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_on_success(RetryQuotaHandle quota, ref QuotaLeaseC lease);
        [DllImport(Lib, CallingConvention = Cc, EntryPoint = "holdoff_retry_quota_on_success")] public static extern uint holdoff_retry_quota_on_success_no_lease(RetryQuotaHandle quota, IntPtr lease);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_available(RetryQuotaHandle quota, out ulong available);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_parse_retry_after(byte[] value, UIntPtr len, ulong wallNowUnixNs, out RetryAfterC result);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_hint_from_headers(HeaderC[] headers, UIntPtr n, ulong wallNowUnixNs, out RetryAfterC result);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_classifier_free(IntPtr classifier);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_classifier_classify(ClassifierHandle classifier, long status, HeaderC[] headers, UIntPtr n, ulong wallNowUnixNs, out ClassificationC result);

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_new(IntPtr breaker, RetryBudgetHandle budget, RetryQuotaHandle quota, ClassifierHandle classifier, out PolicyHandle policy);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_free(IntPtr policy);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_new(out PolicyCallHandle call);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_free(IntPtr call);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_call_attempts(PolicyCallHandle call, out uint attempts);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_before_attempt(PolicyHandle policy, PolicyCallHandle call, out BeforeC before, out PermitC permit);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_after_attempt(PolicyHandle policy, PolicyCallHandle call, ref PermitC permit, uint outcome, ulong retryLaterNs, out DecisionC decision);
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

        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_metric_count();
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_metric_describe(uint metric, out MetricInfoC info);
        [DllImport(Lib, CallingConvention = Cc)] public static extern IntPtr holdoff_metric_attribute_value(uint metric, uint index);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_metrics(IntPtr breaker, out MetricListHandle list);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_policy_metrics(PolicyHandle policy, out MetricListHandle list);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_retry_quota_metrics(RetryQuotaHandle quota, out MetricListHandle list);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_breaker_group_metrics(BreakerGroupHandle group, out MetricListHandle list);
        [DllImport(Lib, CallingConvention = Cc)] public static extern UIntPtr holdoff_metric_list_len(MetricListHandle list);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_metric_list_get(MetricListHandle list, UIntPtr index, out MetricSampleC sample);
        [DllImport(Lib, CallingConvention = Cc)] public static extern uint holdoff_metric_list_free(IntPtr list);

        public static string Str(IntPtr p) { return p == IntPtr.Zero ? null : Marshal.PtrToStringAnsi(p); }
    }
}
