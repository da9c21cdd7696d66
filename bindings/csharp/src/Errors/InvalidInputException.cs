using System;

namespace Holdoff
{
    /// <summary>An argument out of range (the core's stable name invalid_input), e.g. a value that
    /// is not an HTTP status at all (outside 0..999, ParamName status) or a quota lease that was
    /// never acquired (ParamName lease): <see cref="ArgumentException.ParamName"/> and
    /// <see cref="Field"/> name it.</summary>
    public sealed class InvalidInputException : ArgumentOutOfRangeException
    {
        /// <summary>A refusal of the argument <paramref name="field"/>.</summary>
        public InvalidInputException(string field, string message) : base(field, message) { }

        /// <summary>The stable error name, invalid_input.</summary>
        public string Name { get { return "invalid_input"; } }

        /// <summary>The argument concerned (the same as ParamName).</summary>
        public string Field { get { return ParamName; } }
    }
}
