package holdoff_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

// A fleet on the in-process store: a trip at one worker opens the other at its next sync; a
// store that fails detaches the breaker after FallbackAfter and a working one attaches it again;
// bad fleet options are errors naming the field, in Go's terms.
func TestFleet(t *testing.T) {
	const store = "go-api-test-fleet"
	if err := holdoff.MemoryStoreControl(store, holdoff.StoreReset); err != nil {
		t.Fatal(err)
	}
	clock := must(holdoff.NewManualClock(time.Unix(0, 0)))
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1)
	cfg.OpenInterval = holdoff.Backoff{Initial: 10 * time.Second, Multiplier: 1, Max: 10 * time.Second}
	cfg.Fleet = &holdoff.FleetConfig{URL: "memory://" + store, Key: "payments", Refresh: 50 * time.Millisecond,
		FallbackAfter: time.Second}
	w0 := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	defer w0.Close()
	policy := must(holdoff.NewPolicy(holdoff.PolicyConfig{Breaker: cfg, Budget: holdoff.DefaultBudgetConfig()},
		holdoff.WithClock(clock)))
	defer policy.Close()

	p := must(w0.Allow())
	must(w0.Record(p, holdoff.Failure))
	clock.Set(100 * time.Millisecond)
	s := must(w0.SyncFleet())
	if !s.OK || !s.Attached || s.State != holdoff.FleetOpen || s.Episode != 1 || s.Sent != 1 ||
		s.NextProbeAt != 10*time.Second {
		t.Fatalf("after the trip: %+v", s)
	}
	s = must(policy.SyncFleet())
	if !s.OK || s.State != holdoff.FleetOpen || s.Episode != 1 || s.State.String() != "open" {
		t.Fatalf("the policy's breaker: %+v", s)
	}
	_, err := policy.Breaker().Allow()
	var open *holdoff.BreakerOpenError
	if !errors.As(err, &open) || open.RetryAfter != 9900*time.Millisecond {
		t.Fatalf("the policy's breaker should be open for 9.9s, got %v", err)
	}
	if ev := policy.Breaker().DrainEvents(); len(ev) != 1 || ev[0].Reason.String() != "fleet_opened" {
		t.Fatalf("events: %+v", ev)
	}

	must(0, holdoff.MemoryStoreControl(store, holdoff.StoreDown))
	if s = must(w0.SyncFleet()); s.OK || !s.Attached || s.HasRecord || s.Failure != holdoff.FleetUnavailable {
		t.Fatalf("store down: %+v", s)
	}
	clock.Set(1200 * time.Millisecond)
	if s = must(w0.SyncFleet()); s.OK || s.Attached || !s.Detached || w0.FleetAttached() {
		t.Fatalf("after fallback_after: %+v", s)
	}
	must(0, holdoff.MemoryStoreControl(store, holdoff.StoreUp))
	if s = must(w0.SyncFleet()); !s.OK || !s.Reattached || !w0.FleetAttached() {
		t.Fatalf("store up: %+v", s)
	}

	local := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	defer local.Close()
	if _, err := local.SyncFleet(); !errors.Is(err, holdoff.ErrInvalidInput) || err.(*holdoff.Error).Field != "breaker" {
		t.Fatalf("a breaker without a fleet: %v", err)
	}
	if err := holdoff.MemoryStoreControl(store, 9); !errors.Is(err, holdoff.ErrInvalidInput) {
		t.Fatalf("unknown action: %v", err)
	}
	if _, err := holdoff.NewBreakerGroup(cfg); !errors.Is(err, holdoff.ErrInvalidConfig) || err.(*holdoff.Error).Field != "fleet" {
		t.Fatalf("a group with a fleet: %v", err)
	}
	for _, c := range []struct {
		fleet   holdoff.FleetConfig
		field   string
		message string
	}{
		{holdoff.FleetConfig{URL: "http://x", Key: "k"}, "fleet.url", "BreakerConfig.Fleet.URL"},
		{holdoff.FleetConfig{URL: "memory://x", Key: "a b"}, "fleet.key", "BreakerConfig.Fleet.Key"},
		{holdoff.FleetConfig{URL: "memory://x", Key: "k", Refresh: -time.Second}, "fleet.refresh", "got -1s"},
	} {
		bad := holdoff.DefaultBreakerConfig()
		bad.Fleet = &c.fleet
		_, err := holdoff.NewBreaker(bad)
		var e *holdoff.Error
		if !errors.As(err, &e) || !errors.Is(err, holdoff.ErrInvalidConfig) || e.Field != c.field ||
			!strings.Contains(e.Message, c.message) {
			t.Errorf("%+v: got %v, want field %s mentioning %q", c.fleet, err, c.field, c.message)
		}
	}
}
