using System;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A side-effect-free view of a group's counts, read together
    /// (<see cref="BreakerGroup.Snapshot"/>).</summary>
    public sealed class GroupSnapshot
    {
        /// <summary>Breakers the group keeps now (at most <see cref="MaxKeys"/>; overflow breakers
        /// are not kept).</summary>
        public int Keys { get; }
        /// <summary>The bound on <see cref="Keys"/>.</summary>
        public int MaxKeys { get; }
        /// <summary>Idle breakers evicted to make room for a new key, since the group was made.</summary>
        public ulong Evictions { get; }
        /// <summary>Overflow breakers handed out (not kept) because nothing could be evicted.</summary>
        public ulong Overflows { get; }

        internal GroupSnapshot(GroupSnapshotC s)
        {
            // Both counts are at most the core's limit on max_keys (100 000 000): they fit an int.
            Keys = checked((int)(ulong)s.Keys);
            MaxKeys = checked((int)(ulong)s.MaxKeys);
            Evictions = s.Evictions;
            Overflows = s.Overflows;
        }
    }
}
