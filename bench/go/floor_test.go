package bench

import "testing"

// BenchmarkCgoCall is the cost of crossing into C and back once, for reading the others.
func BenchmarkCgoCall(b *testing.B) {
	for b.Loop() {
		CgoFloor()
	}
}
