using System;

namespace Holdoff
{
    /// <summary>Thrown by an operation to say the upstream asked to be left alone for
    /// <see cref="Delay"/> (a rate limit): the retry helpers wait that long before the next
    /// attempt, never shorter (up to the budget's cap), and the breaker opens for it.</summary>
    public sealed class RetryLaterException : Exception
    {
        /// <summary>The server's delay (0 is not a usable hint: a plain failure).</summary>
        public TimeSpan Delay { get; }

        /// <summary>ArgumentOutOfRangeException for a negative <paramref name="delay"/>.</summary>
        public RetryLaterException(TimeSpan delay, string message = null, Exception inner = null)
            : base(message ?? string.Format("holdoff: the upstream asked to retry after {0}", delay), inner)
        {
            if (delay < TimeSpan.Zero) throw new ArgumentOutOfRangeException("delay", delay, "must not be negative");
            Delay = delay;
        }
    }
}
