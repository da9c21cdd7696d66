using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The core's stable names of the enums' values (as the conformance suite and every
    /// binding spell them: half_open, retry_after_above_cap, ...).</summary>
    public static class Names
    {
        /// <summary>The stable name of a state.</summary>
        public static string Of(State v) { return Native.Str(Native.holdoff_state_name((uint)v)); }
        /// <summary>The stable name of an outcome.</summary>
        public static string Of(OutcomeKind v) { return Native.Str(Native.holdoff_outcome_name((uint)v)); }
        /// <summary>The stable name of a record's effect.</summary>
        public static string Of(Effect v) { return Native.Str(Native.holdoff_effect_name((uint)v)); }
        /// <summary>The stable name of a state change's reason.</summary>
        public static string Of(Reason v) { return Native.Str(Native.holdoff_reason_name((uint)v)); }
        /// <summary>The stable name of a decision.</summary>
        public static string Of(DecisionKind v) { return Native.Str(Native.holdoff_decision_kind_name((uint)v)); }
        /// <summary>The stable name of a wait's source.</summary>
        public static string Of(WaitSource v) { return Native.Str(Native.holdoff_wait_source_name((uint)v)); }
        /// <summary>The stable name of a give-up reason.</summary>
        public static string Of(GiveUpReason v) { return Native.Str(Native.holdoff_give_up_reason_name((uint)v)); }
        /// <summary>The stable name of why a hint is unusable.</summary>
        public static string Of(Unusable v) { return Native.Str(Native.holdoff_unusable_name((uint)v)); }
        /// <summary>The stable name of a hint's header.</summary>
        public static string Of(HintSource v) { return Native.Str(Native.holdoff_hint_source_name((uint)v)); }
        /// <summary>The stable name of what BeforeAttempt answers.</summary>
        public static string Of(BeforeAction v) { return Native.Str(Native.holdoff_before_action_name((uint)v)); }
        /// <summary>The stable name of a fleet record's state.</summary>
        public static string Of(FleetState v) { return Native.Str(Native.holdoff_fleet_state_name((uint)v)); }
    }
}
