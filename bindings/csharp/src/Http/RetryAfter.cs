using System;
using System.Collections.Generic;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>Reading a delay hint from Retry-After (RFC 9110 §10.2.3) and rate-limit headers:
    /// the core's parse_retry_after and hint_from_headers.</summary>
    public static class RetryAfter
    {
        /// <summary>Parses one Retry-After value (delta-seconds or an HTTP-date, compared with the
        /// wall time <paramref name="now"/>). Garbage is unusable, never an exception;
        /// ArgumentNullException for a null <paramref name="value"/>.</summary>
        public static Hint Parse(string value, DateTimeOffset now)
        {
            if (value == null) throw new ArgumentNullException(nameof(value));
            byte[] b = Encoding.UTF8.GetBytes(value);
            RetryAfterC r;
            Status.Check(Native.holdoff_parse_retry_after(b, (UIntPtr)b.Length, Units.UnixNs(now, "now"), out r));
            return new Hint(r);
        }

        /// <summary>The delay hint of a response's headers, (name, value) pairs, one per field
        /// value: retry-after-ms, x-ms-retry-after-ms, Retry-After, RateLimit, RateLimit-Reset,
        /// X-RateLimit-Reset, in that precedence. ArgumentNullException for a null
        /// <paramref name="headers"/>.</summary>
        public static Hint HintFromHeaders(IList<KeyValuePair<string, string>> headers, DateTimeOffset now)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                RetryAfterC r;
                Status.Check(Native.holdoff_hint_from_headers(hs, (UIntPtr)hs.Length, Units.UnixNs(now, "now"), out r));
                return new Hint(r);
            }
            finally
            {
                Units.Free(allocated);
            }
        }
    }
}
