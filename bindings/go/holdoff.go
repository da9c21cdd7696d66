// Package holdoff is the Go binding of holdoff: one sans-IO circuit breaker, retry budget and
// retry quota shared by every holdoff SDK (Rust core, C ABI, Python, Node, C#, Kotlin), proven
// equal by one conformance suite.
//
// It links the C ABI's static library (bindings/c, libholdoff.a) through cgo; the module
// carries it, prebuilt for linux/amd64 and linux/arm64 (internal/lib), with its header
// (holdoff.h), so building needs a C compiler but no Rust toolchain. It holds no
// breaker or budget logic of its own: it converts types (time.Duration everywhere), maps
// errors (errors.Is with ErrBreakerOpen, ErrInvalidConfig, ...), and runs the core's retry
// loop of one call (holdoff_execution) in Policy.Do and Policy.DoHTTP: each attempt with its
// own context and time limit, waits on timers that the caller's context cancels.
//
// Every object (Breaker, BreakerGroup, RetryBudget, RetryQuota, Classifier, Policy, clocks,
// Config) is safe for concurrent use by many goroutines. Each holds a handle of the C library:
// Close it when done (the handle is also released by a cleanup, for a Breaker a finalizer,
// when the object becomes unreachable, but not promptly). Close is idempotent and may run
// concurrently with other methods of the same object: calls already in the C library finish on
// the live handle (which is freed when the last of them returns, or for a Breaker that has made
// a call, by its finalizer), later calls see the object closed. Using an object after Close
// returns an error matching ErrClosed from methods that return an error; methods
// without an error result (Snapshot, ForceOpen, Acquire, Now, ...) panic with it instead, as
// that is a programming error they cannot report. The C library is never handed a freed
// handle.
//
// A nil receiver (a nil *Breaker, *Policy, ...) or a nil argument (a *Permit, a
// *PolicyCall, a context, a function) is refused the same way: an *Error matching
// ErrInvalidInput whose Field names it (breaker, policy, permit, call, ctx, fn, ...), returned
// or, from a method without an error result, panicked with. Nothing dereferences it.
//
// Metrics (Breaker.Metrics, Policy.Metrics, RetryQuota.Metrics, BreakerGroup.Metrics; the table
// is Metrics) read the core's own counters, from each object's first read on; the subpackage
// holdoff.dev/go/otelmetric reports them through OpenTelemetry and puts the retry helpers'
// waits and give-ups on the caller's span. This package imports no OpenTelemetry.
//
// Errors about a typed configuration (BreakerConfig, ..., WithAttemptTimeout) speak Go: their
// message names the field as Go spells it (BreakerConfig.OpenInterval.Initial) and gives
// durations as time.Duration prints them; Error.Field keeps the core's name
// (breaker.open_interval.initial), the one every holdoff SDK and the conformance suite use.
package holdoff

/*
#cgo linux,amd64 LDFLAGS: ${SRCDIR}/internal/lib/linux_amd64/libholdoff.a
#cgo linux,arm64 LDFLAGS: ${SRCDIR}/internal/lib/linux_arm64/libholdoff.a
#cgo LDFLAGS: -lm -ldl -lpthread
#cgo noescape holdoff_breaker_allow
#cgo nocallback holdoff_breaker_allow
#cgo noescape holdoff_breaker_record
#cgo nocallback holdoff_breaker_record
#cgo noescape holdoff_breaker_fast_path
#cgo nocallback holdoff_breaker_fast_path
#cgo noescape holdoff_breaker_new
#cgo nocallback holdoff_breaker_new
#cgo noescape holdoff_config_parts
#cgo nocallback holdoff_config_parts
#cgo noescape holdoff_config_parse
#cgo nocallback holdoff_config_parse
#include "holdoff.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// ABIVersion is the C ABI this package was written for.
const ABIVersion = C.HOLDOFF_ABI_VERSION

func init() {
	if got := uint32(C.holdoff_abi_version()); got != ABIVersion {
		panic(fmt.Sprintf("holdoff: linked C library has ABI %d, this package needs %d", got, ABIVersion))
	}
	fastAdmitMask = readFastAdmitMask()
}

// Version is the linked library's version, e.g. "0.1.0".
func Version() string { return C.GoString(C.holdoff_version()) }

// LiveHandles counts the C library's handles that are alive (created and not yet freed), in
// every build: a program that closed everything sees 0 (once the garbage collector has run the
// finalizers of closed breakers that made calls: see Breaker.Close). For leak checks in tests.
// The one system clock that the breakers made without WithClock share, made with the first of
// them and kept for the life of the process, is not counted.
func LiveHandles() uint64 {
	n := uint64(C.holdoff_debug_live_handles())
	if breakerClockMade.Load() && n > 0 {
		n--
	}
	return n
}

var (
	// ErrUpstreamUnavailable is the family of "the upstream cannot be called now" errors:
	// *BreakerOpenError (ErrBreakerOpen) and *GiveUpError match it, each carrying an
	// Unavailable (reason, attempts, retry after, the server's delay, capped, the last error).
	ErrUpstreamUnavailable = errors.New("holdoff: upstream unavailable")
	// ErrBreakerOpen: the breaker refused the call. Errors returned for it are
	// *BreakerOpenError, which carries the retry time.
	ErrBreakerOpen = fmt.Errorf("holdoff: breaker open: %w", ErrUpstreamUnavailable)
	// ErrInvalidConfig: a configuration value breaks a rule (stable name invalid_config). The
	// *Error carries the field, as the conformance suite names it.
	ErrInvalidConfig = errors.New("holdoff: invalid configuration")
	// ErrInvalidInput: an argument is out of range, e.g. an integer that is not an HTTP status
	// (outside 0..999; field status) or a zero time.Time (field now).
	ErrInvalidInput = errors.New("holdoff: invalid input")
	// ErrClockBackwards: a manual clock was set earlier than it shows.
	ErrClockBackwards = errors.New("holdoff: clock cannot go backwards")
	// ErrPermitAlreadyRecorded: a permit was recorded twice, or a quota lease given back twice
	// (stable name permit_already_recorded).
	ErrPermitAlreadyRecorded = errors.New("holdoff: permit already recorded")
	// ErrForeignPermit: a permit was recorded on a breaker that did not issue it, or a quota
	// lease given back to a quota that did not issue it (stable name foreign_permit). The
	// permit or lease stays usable on its own breaker or quota.
	ErrForeignPermit = errors.New("holdoff: permit of another breaker or quota")
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
	Name string
	// Field is the configuration field as the core names it (budget.retry_after_cap), or the
	// argument (status, permit, ctx).
	Field string
	// Message says what is wrong, in Go's terms for a typed configuration
	// ("invalid configuration: BudgetConfig.RetryAfterCap: must be greater than 0, got 0s").
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

// handle owns the C handle of one Go object. Every call holds a use of it while the C
// library works on the handle; Close marks it closed and drops the owner's use, and whichever
// finishes last (Close, or the last call in flight) frees the handle, as .NET's SafeHandle
// does. So Close may race with calls on other goroutines: a call either completes on the live
// handle or returns ErrClosed, and the C library never sees a freed handle. Cost: two atomic
// adds per call.
//
// A handle may instead be pinned (a Breaker's, on its first call): from then on its free waits
// for the object's finalizer, which runs only once the Go object is unreachable, so a call
// holding the object needs no use at all (a load of the state suffices), and memory the handle
// owns (the breaker's fast-path word) may be read without one.
//
// The owner frees a handle nobody closed when it becomes unreachable, and says which kind of
// handle it is (the name in ErrClosed, the free function): handleRef holds the kind and a
// runtime cleanup; a Breaker, where every byte counts, has a finalizer and a fixed kind
// (breakerHandle).
type handle[P any] struct {
	ptr   P            // set once before the object is shared; never cleared (see state)
	state atomic.Int64 // tag, uses and flags (see handleClosed); the owner is one use until Close
}

// handleRef is a handle of the kind it holds, freed by a runtime cleanup when its object
// becomes unreachable without Close.
type handleRef[P any] struct {
	handle[P]
	kind    *handleKind[P]
	cleanup runtime.Cleanup
}

// handleKind is what every handle of one type shares: the name in ErrClosed, the free function.
type handleKind[P any] struct {
	what string
	free func(P)
}

// The bits of handle.state: four flags, then the uses (bits 4..31: up to 2^28 calls in
// flight, far beyond any program's), then a tag the owner gives at init (bits 32..63: a
// Breaker's id, so that one load gives a fast-path call both the state and the id).
const (
	handleClosed   = 1 << 0 // Close has run: no new use
	handlePinned   = 1 << 1 // freed only once the object is unreachable (set only while open)
	handleFreed    = 1 << 2 // the handle was freed (by the last use after Close)
	handleMark     = 1 << 3 // the owner's, set at init and never changed (a Breaker's: refusesInPlace)
	handleUse      = 1 << 4 // one use
	handleTagShift = 32
	handleLow      = (1<<handleTagShift - 1) &^ handleMark // the flags and the uses, without the tag or the mark
)

// init takes ownership of p, with the tag the state carries; the owner registers the cleanup or
// finalizer (both need the object's own type).
func (h *handle[P]) init(p P, tag uint32) { h.initMarked(p, tag, false) }

// initMarked is init, with the owner's mark set if mark.
func (h *handle[P]) initMarked(p P, tag uint32, mark bool) {
	h.ptr = p
	s := int64(uint64(tag)<<handleTagShift) | handleUse
	if mark {
		s |= handleMark
	}
	h.state.Store(s)
}

// acquireAs starts a use of the handle, or fails with ErrClosed after Close. Pair it with
// releaseAs.
func (h *handle[P]) acquireAs(kind *handleKind[P]) (P, error) {
	if h.state.Add(handleUse)&handleClosed != 0 {
		h.releaseAs(kind)
		var none P
		return none, closedErr(kind.what)
	}
	return h.ptr, nil
}

// mustAcquireAs is acquireAs for methods without an error result: use after Close is a
// programming error they cannot report, so they panic with ErrClosed.
func (h *handle[P]) mustAcquireAs(kind *handleKind[P]) P {
	p, err := h.acquireAs(kind)
	if err != nil {
		panic(err)
	}
	return p
}

func (h *handle[P]) releaseAs(kind *handleKind[P]) {
	// Exactly handleClosed below the tag: closed, not pinned, not yet freed, and no use left.
	// The CAS makes the free happen once even when a late acquire (which fails and releases)
	// also sees it.
	if s := h.state.Add(-handleUse); s&handleLow == handleClosed && h.state.CompareAndSwap(s, s|handleFreed) {
		kind.free(h.ptr)
	}
}

// pin makes the handle's free wait until the object is unreachable (see handle), unless Close
// has run; it reports whether the handle is pinned and open. Only the first call writes.
func (h *handle[P]) pin() bool {
	for {
		s := h.state.Load()
		switch {
		case s&handleClosed != 0:
			return false
		case s&handlePinned != 0:
			return true
		case h.state.CompareAndSwap(s, s|handlePinned):
			return true
		}
	}
}

// aliveAs is nil, or an error matching ErrClosed once Close has run.
func (h *handle[P]) aliveAs(kind *handleKind[P]) error {
	if h.state.Load()&handleClosed != 0 {
		return closedErr(kind.what)
	}
	return nil
}

// shut marks the handle closed, so that later acquires fail. It reports whether this was the
// first close, and whether the handle was pinned then (pin never sets the bit once closed, so
// that answer is final). After a first close the owner stops its cleanup or finalizer unless
// pinned, then drops its use with release, which frees the handle now or when the last call in
// flight ends.
func (h *handle[P]) shut() (first, pinned bool) {
	for {
		s := h.state.Load()
		if s&handleClosed != 0 {
			return false, false
		}
		if h.state.CompareAndSwap(s, s|handleClosed) {
			return true, s&handlePinned != 0
		}
	}
}

// freed reports whether release has freed the handle (after Close). Only for a finalizer: then
// no call can be in flight, so the answer cannot change.
func (h *handle[P]) freed() bool { return h.state.Load()&handleFreed != 0 }

// init takes ownership of p, a handle of the given kind; the owner registers the cleanup.
func (h *handleRef[P]) init(p P, kind *handleKind[P]) {
	h.handle.init(p, 0)
	h.kind = kind
}

// acquire starts a use of the handle, or fails with ErrClosed after Close. Pair it with release.
func (h *handleRef[P]) acquire() (P, error) { return h.acquireAs(h.kind) }

// mustAcquire is acquire, panicking with ErrClosed after Close.
func (h *handleRef[P]) mustAcquire() P { return h.mustAcquireAs(h.kind) }

// release ends a use acquire began.
func (h *handleRef[P]) release() { h.releaseAs(h.kind) }

// alive is nil, or an error matching ErrClosed once Close has run.
func (h *handleRef[P]) alive() error { return h.aliveAs(h.kind) }

// close marks the handle closed (later acquires fail) and frees it now, or when the last call
// in flight ends; a pinned handle is left to the cleanup. Only the first close does anything;
// it reports whether it was the first.
func (h *handleRef[P]) close() bool {
	first, pinned := h.shut()
	if !first {
		return false
	}
	if !pinned {
		h.cleanup.Stop()
	}
	h.release()
	return true
}

// heldHandle is a handle a call can hold: handleRef, breakerHandle.
type heldHandle[P any] interface {
	acquire() (P, error)
	release()
}

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
