using System;

namespace Holdoff
{
    /// <summary>Which header a delay hint came from. The values are the C ABI's stable codes, not
    /// the order of precedence (retry-after-ms, x-ms-retry-after-ms, Retry-After, RateLimit,
    /// RateLimit-Reset, X-RateLimit-Reset).</summary>
    public enum HintSource : uint
    {
        RetryAfter = 0, RateLimitReset = 1, XRateLimitReset = 2, None = 3,
        /// <summary><c>retry-after-ms</c> (milliseconds).</summary>
        RetryAfterMs = 4,
        /// <summary><c>x-ms-retry-after-ms</c> (milliseconds).</summary>
        XMsRetryAfterMs = 5,
        /// <summary><c>RateLimit</c>, the structured field's <c>t</c> (seconds).</summary>
        RateLimit = 6,
    }
}
