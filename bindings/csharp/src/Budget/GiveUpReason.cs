using System;

namespace Holdoff
{
    /// <summary>Why a caller should stop retrying (the C ABI's codes; <see cref="Names"/> gives
    /// the core's stable names).</summary>
    public enum GiveUpReason : uint
    {
        BudgetSpent = 0, RetryAfterExceedsRemaining = 1, BackoffExceedsRemaining = 2, AttemptsExhausted = 3,
        NotRetryable = 4, QuotaEmpty = 5, BreakerOpen = 6, Cancelled = 7,
        /// <summary>The server asked for longer than the Retry-After cap and the budget was built
        /// with <see cref="BudgetOptions.GiveUpAboveCap"/>; the decision's ServerDelay is the server's delay.</summary>
        RetryAfterAboveCap = 8,
        /// <summary>The call's total time ran out.</summary>
        TotalTimeout = 9,
    }
}
