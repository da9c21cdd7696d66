//go:build go1.25

package holdoff_test

import (
	"testing"
	"testing/synctest"
	"time"
)

// Inside a synctest bubble Go's clock is fake, and the library's is not: a breaker on the shared
// system clock then leaves its refusals to the library, which admits the probe that is due.
func TestRefusalInPlaceLeavesABubbleToTheLibrary(t *testing.T) {
	b := openBreaker(t, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // only ever later than the 1 ms deadline
	synctest.Test(t, func(t *testing.T) {
		p, ok := b.TryAllow()
		if !ok || !p.IsProbe() || p.Episode() != 1 {
			t.Fatalf("TryAllow in a bubble past the deadline: %v, probe %v; want the probe of episode 1", ok, p.IsProbe())
		}
	})
}
