using System;

namespace Holdoff
{
    /// <summary>An invalid configuration value (the core's stable name invalid_config). For an
    /// options object the message names its C# property and gives the value as the caller passed
    /// it (a TimeSpan, a count); <see cref="ArgumentException.ParamName"/> and
    /// <see cref="Field"/> are the field as the conformance suite names it
    /// (breaker.open_interval.multiplier), or config for JSON that does not parse.</summary>
    public sealed class InvalidConfigException : ArgumentException
    {
        /// <summary>The rule the value broke, as the core states it.</summary>
        internal string Rule { get; }

        /// <summary>A refusal of <paramref name="field"/>.</summary>
        public InvalidConfigException(string field, string message) : this(field, message, message, null) { }

        internal InvalidConfigException(string field, string message, InvalidConfigException inCoreTerms)
            : this(field, message, inCoreTerms.Rule, inCoreTerms) { }

        internal InvalidConfigException(string field, string message, string rule, Exception inner)
            : base(message, field, inner)
        {
            Rule = rule;
        }

        /// <summary>The stable error name, invalid_config.</summary>
        public string Name { get { return "invalid_config"; } }

        /// <summary>The field concerned (the same as ParamName).</summary>
        public string Field { get { return ParamName; } }
    }
}
