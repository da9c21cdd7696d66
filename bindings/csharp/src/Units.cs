using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Holdoff.Interop;

namespace Holdoff
{
    internal static class Units
    {
        public static TimeSpan Span(ulong ns)
        {
            ulong ticks = ns / 100;
            return ticks > (ulong)long.MaxValue ? TimeSpan.MaxValue : TimeSpan.FromTicks((long)ticks);
        }

        public static TimeSpan? Opt(byte has, ulong ns) { return has != 0 ? Span(ns) : (TimeSpan?)null; }

        /// <summary>A non-negative TimeSpan as nanoseconds; a negative one is refused, never clamped.</summary>
        public static ulong Ns(TimeSpan d, string param)
        {
            if (d < TimeSpan.Zero) throw new ArgumentOutOfRangeException(param, d, "must not be negative");
            return TicksToNs(d.Ticks, param, d, "must not exceed 2^64-1 ns (about 584 years)");
        }

        /// <summary>A wall time as nanoseconds since the Unix epoch (the C ABI's unsigned count);
        /// before 1970 or after 2554 is refused, never clamped.</summary>
        public static ulong UnixNs(DateTimeOffset t, string param)
        {
            long ticks = (t - DateTimeOffset.FromUnixTimeMilliseconds(0)).Ticks;
            if (ticks < 0) throw new ArgumentOutOfRangeException(param, t, "must not be before 1970-01-01 UTC");
            return TicksToNs(ticks, param, t, "must not be after 2554-07-21 UTC (2^64-1 ns since 1970)");
        }

        static ulong TicksToNs(long ticks, string param, object value, string rule)
        {
            try
            {
                return checked((ulong)ticks * 100UL);
            }
            catch (OverflowException)
            {
                throw new ArgumentOutOfRangeException(param, value, rule);
            }
        }

        /// <summary>The longest single Task.Delay (its limit is Int32.MaxValue ms, ~24.8 days).</summary>
        static readonly TimeSpan MaxDelayChunk = TimeSpan.FromMilliseconds(int.MaxValue - 1);

        /// <summary>Task.Delay for any non-negative TimeSpan: longer waits are chained.</summary>
        public static async Task Delay(TimeSpan d, CancellationToken ct)
        {
            while (d > MaxDelayChunk)
            {
                await Task.Delay(MaxDelayChunk, ct).ConfigureAwait(false);
                d -= MaxDelayChunk;
            }
            await Task.Delay(d, ct).ConfigureAwait(false);
        }

        public static HeaderC[] Headers(IList<KeyValuePair<string, string>> headers, List<IntPtr> allocated)
        {
            if (headers == null) throw new ArgumentNullException(nameof(headers));
            var arr = new HeaderC[headers.Count];
            for (int i = 0; i < headers.Count; i++)
            {
                arr[i].Name = Utf8(headers[i].Key, allocated, out arr[i].NameLen);
                arr[i].Value = Utf8(headers[i].Value, allocated, out arr[i].ValueLen);
            }
            return arr;
        }

        static IntPtr Utf8(string s, List<IntPtr> allocated, out UIntPtr len)
        {
            byte[] b = Encoding.UTF8.GetBytes(s ?? "");
            IntPtr p = Marshal.AllocHGlobal(Math.Max(b.Length, 1));
            Marshal.Copy(b, 0, p, b.Length);
            allocated.Add(p);
            len = (UIntPtr)b.Length;
            return p;
        }

        public static void Free(List<IntPtr> allocated)
        {
            foreach (var p in allocated) Marshal.FreeHGlobal(p);
        }
    }
}
