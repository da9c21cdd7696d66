// Package holdoff is the Go binding of holdoff: one sans-IO circuit breaker, retry budget and
// retry quota shared by every holdoff SDK (Rust core, C ABI, Python, Node, C#, Kotlin), proven
// equal by one conformance suite.
//
// It links the C ABI's static library (bindings/c, libholdoff.a) through cgo and holds no
// breaker or budget logic of its own: it converts types (time.Duration everywhere), maps
// errors (errors.Is with ErrBreakerOpen, ErrInvalidConfig, ...), sleeps with timers and
// honours context cancellation in the Do helpers.
//
// Every object (Breaker, BreakerGroup, RetryBudget, RetryQuota, Classifier, Policy, clocks,
// Config) is safe for concurrent use by many goroutines. Each holds a handle of the C library:
// Close it when done (the handle is also released by a cleanup when the object becomes
// unreachable, but not promptly). Close must not run concurrently with other methods of the
// same object. Using an object after Close returns an error matching ErrClosed from methods
// that return an error; methods without an error result (Snapshot, ForceOpen, Acquire, Now,
// Policy.Before, ...) panic instead, as that is a programming error they cannot report.
package holdoff

/*
#cgo CFLAGS: -I${SRCDIR}/../c/include
#cgo LDFLAGS: -L${SRCDIR}/../../target/release -l:libholdoff.a -lm -ldl -lpthread
#cgo noescape holdoff_breaker_allow
#cgo nocallback holdoff_breaker_allow
#cgo noescape holdoff_breaker_record
#cgo nocallback holdoff_breaker_record
#include "holdoff.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// ABIVersion is the C ABI this package was written for.
const ABIVersion = C.HOLDOFF_ABI_VERSION

func init() {
	if got := uint32(C.holdoff_abi_version()); got != ABIVersion {
		panic(fmt.Sprintf("holdoff: linked C library has ABI %d, this package needs %d", got, ABIVersion))
	}
}

// Version is the linked library's version, e.g. "0.1.0".
func Version() string { return C.GoString(C.holdoff_version()) }

// LiveHandles counts the C library's handles that are alive (created and not yet freed), in
// every build: a program that closed everything sees 0. For leak checks in tests.
func LiveHandles() uint64 { return uint64(C.holdoff_debug_live_handles()) }

var (
	// ErrUpstreamUnavailable is the family of "the upstream cannot be called now" errors:
	// ErrBreakerOpen wraps it.
	ErrUpstreamUnavailable = errors.New("holdoff: upstream unavailable")
	// ErrBreakerOpen: the breaker refused the call. Errors returned for it are
	// *BreakerOpenError, which carries the retry time.
	ErrBreakerOpen = fmt.Errorf("holdoff: breaker open: %w", ErrUpstreamUnavailable)
	// ErrInvalidConfig: a configuration value breaks a rule (stable name invalid_config). The
	// *Error carries the field, as the conformance suite names it.
	ErrInvalidConfig = errors.New("holdoff: invalid configuration")
	// ErrInvalidInput: an argument is out of range, e.g. an HTTP status outside 100..599.
	ErrInvalidInput = errors.New("holdoff: invalid input")
	// ErrClockBackwards: a manual clock was set earlier than it shows.
	ErrClockBackwards = errors.New("holdoff: clock cannot go backwards")
	// ErrPermitAlreadyRecorded: a permit (or quota lease) was recorded twice.
	ErrPermitAlreadyRecorded = errors.New("holdoff: permit already recorded")
	// ErrForeignPermit: a permit was recorded on a breaker that did not issue it.
	ErrForeignPermit = errors.New("holdoff: permit of another breaker")
	// ErrClosed: an object was used after its Close.
	ErrClosed = errors.New("holdoff: use of a closed object")
	// ErrInternal: a bug in holdoff (a caught panic, a freed handle detected).
	ErrInternal = errors.New("holdoff: internal error")
)

// Error is an error returned by the C library: its stable name (invalid_config,
// invalid_input, clock_backwards, permit_already_recorded, foreign_permit, ...), the field or
// argument it concerns, and the message. errors.Is matches the package's sentinel of the same
// name (ErrInvalidConfig, ...).
type Error struct {
	Name    string
	Field   string
	Message string
	status  C.holdoff_status
}

func (e *Error) Error() string {
	if e.Message != "" {
		return "holdoff: " + e.Message
	}
	return "holdoff: " + e.Name
}

// Is reports whether target is the sentinel for this error's name.
func (e *Error) Is(target error) bool {
	switch e.status {
	case C.HOLDOFF_STATUS_INVALID_CONFIG:
		return target == ErrInvalidConfig
	case C.HOLDOFF_STATUS_INVALID_INPUT:
		return target == ErrInvalidInput
	case C.HOLDOFF_STATUS_CLOCK_BACKWARDS:
		return target == ErrClockBackwards
	case C.HOLDOFF_STATUS_PERMIT_ALREADY_RECORDED:
		return target == ErrPermitAlreadyRecorded
	case C.HOLDOFF_STATUS_FOREIGN_PERMIT:
		return target == ErrForeignPermit
	default:
		return target == ErrInternal
	}
}

func statusName(st C.holdoff_status) string {
	if n := C.holdoff_status_name(C.uint32_t(st)); n != nil {
		return C.GoString(n)
	}
	return fmt.Sprintf("status %d", int(st))
}

// errOf maps a status to an error with the static message only: for hot paths, where reading
// the thread-local detail would need the OS thread pinned.
func errOf(st C.holdoff_status) error {
	if st == C.HOLDOFF_STATUS_OK {
		return nil
	}
	return &Error{Name: statusName(st), Message: C.GoString(C.holdoff_status_message(C.uint32_t(st))), status: st}
}

// detailed runs a C call with the goroutine pinned to its OS thread, so that the
// thread-local error detail read afterwards is this call's.
func detailed(f func() C.holdoff_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.HOLDOFF_STATUS_OK {
		return nil
	}
	return &Error{
		Name:    statusName(st),
		Field:   C.GoString(C.holdoff_last_error_field()),
		Message: C.GoString(C.holdoff_last_error_message()),
		status:  st,
	}
}

func closedPanic(what string) { panic(closedErr(what)) }

func closedErr(what string) error {
	return fmt.Errorf("holdoff: use of a closed %s: %w", what, ErrClosed)
}

func dur(ns C.uint64_t) time.Duration {
	if uint64(ns) > uint64(1<<63-1) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ns)
}

func optDur(has C.uint8_t, ns C.uint64_t) (time.Duration, bool) {
	if has == 0 {
		return 0, false
	}
	return dur(ns), true
}

// nanos converts a non-negative duration for the C ABI; ok is false for a negative one.
func nanos(d time.Duration) (C.uint64_t, bool) {
	if d < 0 {
		return 0, false
	}
	return C.uint64_t(d), true
}

func inputErr(field, rule string) error {
	return &Error{Name: "invalid_input", Field: field, Message: "invalid input: " + field + ": " + rule,
		status: C.HOLDOFF_STATUS_INVALID_INPUT}
}

// cgoBaseline is one trivial cgo call, the floor under every holdoff call from Go
// (BenchmarkCgoCall).
func cgoBaseline() uint32 { return uint32(C.holdoff_abi_version()) }
