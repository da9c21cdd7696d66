package holdoff

// SetDrainPassHook makes f run between two passes of Breaker.DrainEvents until restore is
// called. Not safe to call while DrainEvents runs on another goroutine.
func SetDrainPassHook(f func()) (restore func()) {
	old := testHookDrainPass
	testHookDrainPass = f
	return func() { testHookDrainPass = old }
}
