package holdoff

import "testing"

// BenchmarkCgoCall is the cost of crossing into C and back once, for reading the others:
// allow+record is two crossings.
func BenchmarkCgoCall(b *testing.B) {
	for b.Loop() {
		cgoBaseline()
	}
}
