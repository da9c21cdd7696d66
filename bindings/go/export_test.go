package holdoff

import (
	"sync/atomic"
	"unsafe"
)

// SetDrainPassHook makes f run between two passes of Breaker.DrainEvents until restore is
// called. Not safe to call while DrainEvents runs on another goroutine.
func SetDrainPassHook(f func()) (restore func()) {
	old := testHookDrainPass
	testHookDrainPass = f
	return func() { testHookDrainPass = old }
}

// CountLibraryCalls counts, until stop is called, every admission and record that goes through
// the C library rather than a breaker's fast-path word (Allow, Record, Do). Not safe to call
// while another count runs.
func CountLibraryCalls() (calls *atomic.Int64, stop func()) {
	calls = new(atomic.Int64)
	libraryCalls.Store(calls)
	return calls, func() { libraryCalls.Store(nil) }
}

// UsesFastPath reports whether b reads a fast-path word (false for a fleet's breaker).
func UsesFastPath(b *Breaker) bool { return b.word != nil }

// BreakerWrapperSize is the size of the Go side of a breaker, without its finalizer.
const BreakerWrapperSize = unsafe.Sizeof(Breaker{})
