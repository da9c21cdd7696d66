// Package bench holds the Go binding's benchmarks beside their peers (sony/gobreaker,
// failsafe-go), in a module of its own so that the binding's module depends on neither.
package bench

/*
#cgo CFLAGS: -I${SRCDIR}/../../bindings/c/include
#include "holdoff.h"
*/
import "C"

// CgoFloor is one trivial call into the C library and back: the floor under every holdoff
// call from Go (allow + record is two such crossings). The library is linked by the binding.
func CgoFloor() uint32 { return uint32(C.holdoff_abi_version()) }
