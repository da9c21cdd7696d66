using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>The C library's status codes, turned into exceptions.</summary>
    internal static class Status
    {
        public const uint Ok = 0, BreakerOpen = 1, InvalidConfig = 200, InvalidInput = 201, ClockBackwards = 202,
            PermitAlreadyRecorded = 203, ForeignPermit = 204;

        /// <summary>Throws for an error status, with the calling thread's detail.</summary>
        public static void Check(uint status)
        {
            if (status == Ok || status == BreakerOpen) return;
            string name = Native.Str(Native.holdoff_status_name(status)) ?? ("status " + status);
            string field = Native.Str(Native.holdoff_last_error_field());
            string detail = Native.Str(Native.holdoff_last_error_message()) ?? name;
            string message = "holdoff: " + detail;
            switch (status)
            {
                case InvalidConfig: throw new InvalidConfigException(field, message, Rule(detail, field), null);
                case PermitAlreadyRecorded:
                case ForeignPermit: throw new PermitException(name, field, message);
                case ClockBackwards: throw new HoldoffException(name, field, message);
                case InvalidInput: throw new InvalidInputException(field, message);
                default: throw new HoldoffException(name, field, message);
            }
        }

        /// <summary>The rule of a configuration error: its detail past "invalid configuration:
        /// field: ".</summary>
        static string Rule(string detail, string field)
        {
            string prefix = field + ": ";
            int at = field != null ? detail.IndexOf(prefix, StringComparison.Ordinal) : -1;
            return at >= 0 ? detail.Substring(at + prefix.Length) : detail;
        }
    }
}
