using System;

namespace Holdoff
{
    /// <summary>The state of a fleet's shared record.</summary>
    public enum FleetState : uint { Closed, Open }

    /// <summary>Why a sync's exchange with the store failed.</summary>
    public enum FleetFailure : uint
    {
        /// <summary>The exchange succeeded.</summary>
        None,
        /// <summary>The store could not be reached or did not answer within the timeout.</summary>
        Unavailable,
        /// <summary>The store holds a record that is not a fleet record (refused, never used).</summary>
        Corrupt,
    }

    /// <summary>What one <see cref="Breaker.SyncFleet"/> did.</summary>
    public sealed class FleetSync
    {
        /// <summary>The exchange succeeded and the shared record was applied to the breaker.</summary>
        public bool Ok { get; }
        /// <summary>The breaker follows the fleet after this sync (false: a local breaker).</summary>
        public bool Attached { get; }
        /// <summary>This sync detached the breaker (FallbackAfter without a successful sync).</summary>
        public bool Detached { get; }
        /// <summary>This sync attached a detached breaker again.</summary>
        public bool Reattached { get; }
        /// <summary>This sync claimed the fleet's probe and got it (the breaker may probe now).</summary>
        public bool Granted { get; }
        /// <summary>Operations sent to the store.</summary>
        public long Sent { get; }
        /// <summary>Why the exchange failed (<see cref="FleetFailure.None"/> when Ok).</summary>
        public FleetFailure Failure { get; }
        /// <summary>The shared record's state; null unless Ok.</summary>
        public FleetState? State { get; }
        /// <summary>The shared record's episode (0: never opened); null unless Ok.</summary>
        public ulong? Episode { get; }
        /// <summary>Probe answers the fleet counted this episode; null unless Ok.</summary>
        public uint? Recoveries { get; }
        /// <summary>The fleet's next probe time on the store's clock (since its epoch); null
        /// unless Ok.</summary>
        public TimeSpan? NextProbeAt { get; }

        internal FleetSync(Interop.FleetSyncC r)
        {
            Ok = r.Ok != 0;
            Attached = r.Attached != 0;
            Detached = r.Detached != 0;
            Reattached = r.Reattached != 0;
            Granted = r.Granted != 0;
            Sent = (long)r.Sent;
            Failure = (FleetFailure)r.Error;
            if (r.HasRecord != 0)
            {
                State = (FleetState)r.FleetState;
                Episode = r.FleetEpisode;
                Recoveries = r.FleetRecoveries;
                NextProbeAt = TimeSpan.FromMilliseconds(r.NextProbeAtMs);
            }
        }
    }

    /// <summary>What <see cref="Fleet.MemoryStoreControl"/> does.</summary>
    public enum MemoryStoreAction : uint
    {
        /// <summary>Every exchange fails until <see cref="Up"/>.</summary>
        Down,
        /// <summary>Exchanges work again; records are kept.</summary>
        Up,
        /// <summary>Every record is wiped, as a Redis FLUSHDB or an expiry would.</summary>
        Flush,
        /// <summary>Every record wiped and the store up: a fresh store.</summary>
        Reset,
    }

    /// <summary>Test helpers of fleets.</summary>
    public static class Fleet
    {
        /// <summary>For tests: acts on the in-process store <c>memory://name</c> that fleets with
        /// that url share. ArgumentNullException for a null name; InvalidInputException naming
        /// action for an unknown action.</summary>
        public static void MemoryStoreControl(string name, MemoryStoreAction action)
        {
            if (name == null) throw new ArgumentNullException(nameof(name));
            byte[] b = System.Text.Encoding.UTF8.GetBytes(name);
            Status.Check(Interop.Native.holdoff_memory_store_control(b, (UIntPtr)b.Length, (uint)action));
        }
    }
}
