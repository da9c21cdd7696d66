using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The result of <see cref="RetryQuota.Acquire"/>: the tokens of one retry, issued
    /// by one quota. Give an acquired lease back once, to the quota that issued it, with
    /// <see cref="RetryQuota.OnSuccess"/>; the core checks both (thread-safe: of concurrent
    /// give-backs of one lease, one succeeds).</summary>
    public sealed class QuotaLease
    {
        internal QuotaLeaseC Raw;
        internal QuotaLease(QuotaLeaseC raw) { Raw = raw; }

        /// <summary>Whether the tokens were taken (false: too few were left; do not retry).</summary>
        public bool Acquired { get { return Raw.Acquired != 0; } }

        /// <summary>The tokens taken (0 when not acquired).</summary>
        public ulong Cost { get { return Raw.Cost; } }

        /// <summary>Tokens left in the bucket right after this acquisition.</summary>
        public ulong Available { get { return Raw.Available; } }
    }
}
