using System;

namespace Holdoff
{
    /// <summary>A permit recorded twice (Name permit_already_recorded) or on a breaker that did
    /// not issue it (foreign_permit); likewise a quota lease given back twice or to another quota
    /// (Field lease). The permit or lease is unchanged: a foreign one stays usable where it was
    /// issued.</summary>
    public sealed class PermitException : HoldoffException
    {
        /// <summary>A refused permit (Field permit).</summary>
        public PermitException(string name, string message) : base(name, "permit", message) { }

        /// <summary>A refused permit or lease (<paramref name="field"/> null: permit).</summary>
        public PermitException(string name, string field, string message) : base(name, field ?? "permit", message) { }
    }
}
