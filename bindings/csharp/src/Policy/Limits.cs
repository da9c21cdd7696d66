using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The time limits of a call, as set (null: no limit) and as the C library takes
    /// them, checked by the core.</summary>
    internal sealed class Limits
    {
        public readonly TimeSpan? Attempt, Total;
        public readonly ExecutionOptionsC C;

        Limits(TimeSpan? attempt, TimeSpan? total, ExecutionOptionsC c)
        {
            Attempt = attempt;
            Total = total;
            C = c;
        }

        /// <summary>The core's defaults (no attempt timeout, its default total timeout).</summary>
        public static readonly Limits Default = Of(new ConfigJson());

        /// <summary>Limits checked by the core: InvalidConfigException naming
        /// Policy.AttemptTimeout (execute.attempt_timeout) or Policy.TotalTimeout
        /// (execute.total_timeout) for a zero or negative value. Timeout.InfiniteTimeSpan is no
        /// limit, as null is.</summary>
        public static Limits Make(TimeSpan? attempt, TimeSpan? total)
        {
            return Of(new ConfigJson().Execute(attempt, total));
        }

        static Limits Of(ConfigJson json)
        {
            return json.Build(c =>
            {
                var o = c.ExecutionOptions();
                return new Limits(Span(o.AttemptTimeout, o.AttemptTimeoutNs), Span(o.TotalTimeout, o.TotalTimeoutNs), o);
            });
        }

        internal static TimeSpan? Span(uint limit, ulong ns) { return limit == (uint)LimitC.Set ? Units.Span(ns) : (TimeSpan?)null; }
    }
}
