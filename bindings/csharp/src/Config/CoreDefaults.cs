using System;
using System.Globalization;
using System.Text;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The core's default configuration, as the C library writes it in the neutral format
    /// with every field (holdoff_config_to_json without a configuration): the options classes take
    /// their defaults from it, so none is restated in C#. Durations are float milliseconds; null
    /// is "none".</summary>
    internal static class CoreDefaults
    {
        static readonly Lazy<JsonNode> Doc = new Lazy<JsonNode>(Read);

        static JsonNode Read()
        {
            UIntPtr len;
            Status.Check(Native.holdoff_config_defaults_to_json(IntPtr.Zero, null, UIntPtr.Zero, out len));
            var buf = new byte[(int)len + 1];
            Status.Check(Native.holdoff_config_defaults_to_json(IntPtr.Zero, buf, (UIntPtr)buf.Length, out len));
            return Json.Parse(Encoding.UTF8.GetString(buf, 0, (int)len));
        }

        /// <summary>One part (breaker, budget, quota, ...).</summary>
        public static JsonNode Part(string name) { return Doc.Value.Get(name); }

        public static int Int(JsonNode part, string key) { return checked((int)part.I64(key).Value); }

        /// <summary>A duration member (float milliseconds) as a TimeSpan.</summary>
        public static TimeSpan Span(JsonNode part, string key)
        {
            return Units.Span((ulong)Math.Round(part.Get(key).Number * 1e6));
        }

        /// <summary>A duration member that may be null ("none").</summary>
        public static TimeSpan? OptSpan(JsonNode part, string key)
        {
            return part.Get(key).Kind == JsonKind.Null ? (TimeSpan?)null : Span(part, key);
        }

        /// <summary>The seed, read from its text: a double would round one above 2^53.</summary>
        public static ulong Seed(JsonNode part) { return ulong.Parse(part.Get("seed").Raw, CultureInfo.InvariantCulture); }

        public static BackoffOptions Backoff(JsonNode b)
        {
            return new BackoffOptions
            {
                Initial = Span(b, "initial_ms"), Multiplier = b.Get("multiplier").Number, Max = Span(b, "max_ms"),
                Jitter = b.Get("jitter").Number,
            };
        }
    }
}
