using System;

namespace Holdoff
{
    /// <summary>A retry quota's configuration, in tokens; a new instance holds the core's
    /// defaults (AWS standard mode). The core checks every value when the quota is built:
    /// <see cref="InvalidConfigException"/> names the property and the field (quota.capacity, ...).</summary>
    public sealed class QuotaOptions
    {
        /// <summary>Tokens in a full bucket, 1..1 000 000 000 (500 by default).</summary>
        public long Capacity { get; set; }

        /// <summary>The cost of a retry, 1..<see cref="Capacity"/> (5 by default).</summary>
        public long RetryCost { get; set; }

        /// <summary>The cost of a retry after a timeout, 1..<see cref="Capacity"/> (10 by default).</summary>
        public long TimeoutCost { get; set; }

        /// <summary>Tokens a success that needed no retry adds, 0..<see cref="Capacity"/> (1 by
        /// default).</summary>
        public long SuccessRefill { get; set; }

        /// <summary>The core's defaults.</summary>
        public QuotaOptions()
        {
            var d = CoreDefaults.Part("quota");
            Capacity = CoreDefaults.Int(d, "capacity");
            RetryCost = CoreDefaults.Int(d, "retry_cost");
            TimeoutCost = CoreDefaults.Int(d, "timeout_cost");
            SuccessRefill = CoreDefaults.Int(d, "success_refill");
        }
    }
}
