// holdoff for C#: a thin skin over the C ABI (libholdoff). No breaker or budget logic lives
// here: it converts TimeSpans and options, maps statuses to exceptions, sleeps with Task.Delay
// and honours CancellationToken in the retry helpers. Every object is thread-safe and
// IDisposable; each wraps SafeHandles (a Breaker counts its calls in flight itself), so a handle
// can never be freed while a call is using it, and is released by the finalizer if Dispose was
// forgotten.
using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>Library information and leak checks.</summary>
    public static class Library
    {
        /// <summary>The ABI this binding was written for.</summary>
        public const uint AbiVersion = 6;

        static Library()
        {
            uint got = Native.holdoff_abi_version();
            if (got != AbiVersion)
                throw new InvalidOperationException(string.Format("holdoff: library ABI {0}, binding needs {1}", got, AbiVersion));
        }

        /// <summary>Checks the linked library's ABI (throws on a mismatch).</summary>
        public static void EnsureCompatible() { }

        /// <summary>The linked library's ABI version (one call into the library each time).</summary>
        public static uint LinkedAbiVersion { get { return Native.holdoff_abi_version(); } }

        /// <summary>The linked library's version.</summary>
        public static string Version { get { return Native.Str(Native.holdoff_version()); } }

        /// <summary>C handles alive now: 0 when everything was disposed. The one system clock
        /// shared by breakers made without a clock lives as long as the process and is left out.</summary>
        public static ulong LiveHandles
        {
            get
            {
                bool shared = BreakerClock.Made;
                ulong n = Native.holdoff_debug_live_handles();
                return shared && n > 0 ? n - 1 : n;
            }
        }
    }
}
