//go:build go1.25

package holdoff_test

import (
	"testing"
	"testing/synctest"
	"time"
)

// Inside a synctest bubble Go's clock is fake (the year 2000), and the library's is not: a
// breaker on the shared system clock still decides on the real clock, and admits the probe that
// is due.
func TestRefusalInABubbleAdmitsTheDueProbe(t *testing.T) {
	b := openBreaker(t, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // only ever later than the 1 ms deadline
	synctest.Test(t, func(t *testing.T) {
		p, ok := b.TryAllow()
		if !ok || !p.IsProbe() || p.Episode() != 1 {
			t.Fatalf("TryAllow in a bubble past the deadline: %v, probe %v; want the probe of episode 1", ok, p.IsProbe())
		}
	})
}

// A bubble's fake clock may be moved anywhere, past the moment the process started too: a
// refusal asked for there is still decided on the real clock, the library's, so it never
// refuses a probe that is due.
func TestRefusalInABubbleFollowsTheRealClock(t *testing.T) {
	start := time.Now()
	b := openBreaker(t, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // only ever later than the 1 ms deadline
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock (no monotonic reading) to start's wall time: before the trip.
		time.Sleep(start.Sub(time.Now()))
		p, ok := b.TryAllow()
		if !ok || !p.IsProbe() || p.Episode() != 1 {
			t.Fatalf("TryAllow in a bubble moved to %v: %v, probe %v; want the probe of episode 1", time.Now(), ok, p.IsProbe())
		}
	})
}
