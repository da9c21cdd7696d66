using System;

namespace Holdoff
{
    /// <summary>An error of the C library: its stable name (invalid_input, clock_backwards,
    /// permit_already_recorded, foreign_permit, ...) and the field it concerns.</summary>
    public class HoldoffException : InvalidOperationException
    {
        /// <summary>The core's stable name of the error (clock_backwards, permit_already_recorded, ...).</summary>
        public string Name { get; }

        /// <summary>The field or argument concerned (permit, lease, ...), or null when the core
        /// names none.</summary>
        public string Field { get; }

        /// <summary>An error named <paramref name="name"/> concerning <paramref name="field"/>.</summary>
        public HoldoffException(string name, string field, string message) : base(message)
        {
            Name = name;
            Field = field;
        }
    }
}
