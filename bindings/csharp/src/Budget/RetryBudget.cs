using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The retry budget of one upstream (rate-limit episodes, Retry-After cap, counted
    /// backoff).</summary>
    public sealed class RetryBudget : IDisposable
    {
        internal readonly RetryBudgetHandle Handle;

        internal RetryBudget(RetryBudgetHandle h) { Handle = h; }

        /// <summary>A budget reading <paramref name="clock"/> (the system clock when null).
        /// Throws InvalidConfigException (an ArgumentException) naming the invalid property and
        /// field; ArgumentNullException for a null <paramref name="options"/>.</summary>
        public RetryBudget(BudgetOptions options, Clock clock = null)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            Handle = new ConfigJson().Budget(options).Build(c => c.NewRetryBudget(clock)).Handle;
        }

        /// <summary>Decides what follows an attempt that came to <paramref name="outcome"/>, for
        /// the logical call <paramref name="state"/>: done, retry after a delay, or give up.
        /// ArgumentNullException for a null <paramref name="state"/>; ArgumentOutOfRangeException
        /// (ParamName delay) for a retry-later with a negative delay.</summary>
        public Decision Decide(RetryState state, Outcome outcome)
        {
            if (state == null) throw new ArgumentNullException(nameof(state));
            DecisionC d;
            Status.Check(Native.holdoff_retry_budget_decide(Handle, state.Handle, (uint)outcome.Kind, outcome.DelayNs(), out d));
            return new Decision(d);
        }

        /// <summary>When the current rate-limit episode started, on the budget's clock (the time
        /// since its origin); null outside an episode.</summary>
        public TimeSpan? EpisodeStart
        {
            get
            {
                EpisodeC e;
                Status.Check(Native.holdoff_retry_budget_episode(Handle, out e));
                return Units.Opt(e.Active, e.StartNs);
            }
        }

        /// <summary>Releases the budget.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
