// API tests of the fleet option on the in-process store (part of ApiTests).
using System;

namespace Holdoff.Tests
{
    static partial class ApiTests
    {
        /// <summary>A trip at one worker opens the other at its next sync; a store that fails
        /// detaches the breaker after FallbackAfter and a working one attaches it again; bad fleet
        /// options are InvalidConfigExceptions naming the field and the property.</summary>
        static void Fleets()
        {
            const string store = "csharp-api-test-fleet";
            Fleet.MemoryStoreControl(store, MemoryStoreAction.Reset);
            Func<BreakerOptions> options = () => new BreakerOptions
            {
                Trip = TripPolicy.ConsecutiveFailures(1),
                OpenInterval = new BackoffOptions
                {
                    Initial = TimeSpan.FromSeconds(10), Multiplier = 1, Max = TimeSpan.FromSeconds(10),
                },
                Fleet = new FleetOptions("memory://" + store, "payments")
                {
                    Refresh = TimeSpan.FromMilliseconds(50), FallbackAfter = TimeSpan.FromSeconds(1),
                },
            };
            using (var clock = new ManualClock(DateTimeOffset.FromUnixTimeMilliseconds(0)))
            using (var w0 = new Breaker(options(), clock))
            using (var policy = new Policy(new PolicyOptions { Breaker = options() }, clock))
            {
                w0.Record(w0.Allow(), Outcome.Failure);
                clock.Set(TimeSpan.FromMilliseconds(100));
                var s = w0.SyncFleet();
                Check(s.Ok && s.Attached && s.State == FleetState.Open && s.Episode == 1 && s.Sent == 1
                    && s.NextProbeAt == TimeSpan.FromSeconds(10), "fleet: the trip is published");
                s = policy.SyncFleet();
                Check(s.Ok && s.State == FleetState.Open && s.Episode == 1 && Names.Of(s.State.Value) == "open",
                    "fleet: the policy's breaker hears of it");
                Permit p;
                BreakerOpenException refusal;
                Check(!policy.Breaker.TryAllow(out p, out refusal) && refusal.RetryAfter == TimeSpan.FromMilliseconds(9900),
                    "fleet: the policy's breaker refuses until the fleet's probe");
                var events = policy.Breaker.DrainEvents();
                Check(events.Count == 1 && events[0].Reason == Reason.FleetOpened
                    && Names.Of(Reason.FleetOpened) == "fleet_opened", "fleet: opened by the fleet");

                Fleet.MemoryStoreControl(store, MemoryStoreAction.Down);
                s = w0.SyncFleet();
                Check(!s.Ok && s.Attached && !s.State.HasValue && s.Failure == FleetFailure.Unavailable,
                    "fleet: a store down is a result");
                clock.Set(TimeSpan.FromMilliseconds(1200));
                s = w0.SyncFleet();
                Check(!s.Ok && !s.Attached && s.Detached && !w0.FleetAttached, "fleet: detached after FallbackAfter");
                Fleet.MemoryStoreControl(store, MemoryStoreAction.Up);
                s = w0.SyncFleet();
                Check(s.Ok && s.Reattached && w0.FleetAttached, "fleet: attached again");

                using (var local = new Breaker(new BreakerOptions(), clock))
                {
                    var e = Throws<InvalidInputException>(() => local.SyncFleet(), "fleet: a breaker without one");
                    Check(e != null && e.ParamName == "breaker", "fleet: names the breaker");
                }
                var g = Throws<InvalidConfigException>(() => new BreakerGroup(options(), clock).Dispose(), "fleet: a group");
                Check(g != null && g.ParamName == "fleet", "fleet: a group names fleet");
                Throws<InvalidInputException>(() => Fleet.MemoryStoreControl(store, (MemoryStoreAction)9), "fleet: bad action");
            }
            var bad = new[]
            {
                new { Fleet = new FleetOptions("http://x", "k"), Field = "fleet.url", Property = "FleetOptions.Url" },
                new { Fleet = new FleetOptions("memory://x", "a b"), Field = "fleet.key", Property = "FleetOptions.Key" },
                new { Fleet = new FleetOptions(null, "k"), Field = "fleet.url", Property = "FleetOptions.Url" },
                new
                {
                    Fleet = new FleetOptions("memory://x", "k") { Refresh = TimeSpan.FromSeconds(-1) },
                    Field = "fleet.refresh", Property = "FleetOptions.Refresh",
                },
            };
            foreach (var b in bad)
            {
                var e = Throws<InvalidConfigException>(() => new Breaker(new BreakerOptions { Fleet = b.Fleet }).Dispose(),
                    "fleet: refused " + b.Field);
                Check(e != null && e.ParamName == b.Field && e.Message.Contains(b.Property),
                    "fleet: " + b.Field + " names " + b.Property + ": " + (e != null ? e.Message : ""));
            }
        }
    }
}
