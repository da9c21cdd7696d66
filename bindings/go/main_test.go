package holdoff_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	holdoff "holdoff.dev/go"
)

// TestMain asserts that the tests left no C handle alive: every Close path (and the cleanups
// of objects the tests dropped on purpose) ran.
func TestMain(m *testing.M) {
	code := m.Run()
	for i := 0; i < 50 && holdoff.LiveHandles() != 0; i++ {
		runtime.GC() // run the cleanups of unreachable objects
		runtime.Gosched()
	}
	if n := holdoff.LiveHandles(); n != 0 && code == 0 {
		fmt.Printf("FAIL leak check: %d holdoff handles still alive\n", n)
		code = 1
	}
	os.Exit(code)
}
