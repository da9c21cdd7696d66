using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A permit to make one call, from <see cref="Breaker.Allow"/> or
    /// <see cref="Policy.BeforeAttempt"/>: record it exactly once, on the breaker object that
    /// admitted it.</summary>
    public sealed class Permit
    {
        internal PermitC Raw;

        internal Permit(PermitC raw) { Raw = raw; }

        /// <summary>The open episode this call probes, or 0 when it was admitted while closed.</summary>
        public uint Episode { get { return Raw.Episode; } }

        /// <summary>Whether the call is a probe of an open breaker.</summary>
        public bool IsProbe { get { return Raw.Probe != 0; } }
    }
}
