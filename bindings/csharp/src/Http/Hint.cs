using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A parsed delay hint (Retry-After and the rate-limit headers).</summary>
    public sealed class Hint
    {
        /// <summary>The delay the upstream asked for, rounded up to the millisecond;
        /// <see cref="TimeSpan.Zero"/> when <see cref="Unusable"/> says why there is none.</summary>
        public TimeSpan Delay { get; }

        /// <summary><see cref="Holdoff.Unusable.Usable"/>, or why the hint cannot be used
        /// (missing, malformed, signed, conflicting).</summary>
        public Unusable Unusable { get; }

        /// <summary>Which header the hint came from (<see cref="HintSource.None"/> without one).</summary>
        public HintSource Source { get; }

        internal Hint(RetryAfterC r)
        {
            Delay = Units.Span(r.DelayNs);
            Unusable = (Unusable)r.Unusable;
            Source = (HintSource)r.Source;
        }
    }
}
