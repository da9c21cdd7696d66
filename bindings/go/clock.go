package holdoff

// #include "holdoff.h"
import "C"

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname (monotonicNow)
)

// Clock is the time source of breakers, budgets and policies: a SystemClock in production, a
// ManualClock in tests. A policy's breaker and budget must share one.
type Clock interface {
	// ref is the clock's handle, nil for a nil clock.
	ref() *handleRef[*C.holdoff_clock]
}

// SystemClock reads the process's monotonic clock.
type SystemClock struct {
	h handleRef[*C.holdoff_clock]
}

// NewSystemClock creates a system clock (its origin is now).
func NewSystemClock() *SystemClock {
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_system(&p); st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	c := &SystemClock{}
	c.h.init(p, &kindSystemClock)
	c.h.cleanup = runtime.AddCleanup(c, freeClock, p)
	return c
}

func freeClock(p *C.holdoff_clock) { C.holdoff_clock_free(p) }

func (c *SystemClock) ref() *handleRef[*C.holdoff_clock] {
	if c == nil {
		return nil
	}
	return &c.h
}

// Close releases the clock's handle; objects built with it keep using it.
func (c *SystemClock) Close() error {
	if c == nil {
		return nilErr("clock")
	}
	c.h.close()
	return nil
}

// ManualClock moves only when told to: for tests and simulations. Times are durations since
// its origin (0 at creation); WallOrigin is the wall time at the origin, used only for
// Retry-After HTTP-dates. The time limits of Do and DoHTTP attempts run on a policy's clock:
// on a ManualClock they pass when Set or Advance moves it past them, never by the wall clock.
type ManualClock struct {
	h handleRef[*C.holdoff_clock]

	mu     sync.Mutex
	timers map[*manualTimer]struct{}
}

// manualTimer runs fire once the clock shows at least at (ns since the origin).
type manualTimer struct {
	at   uint64
	fire func()
}

// NewManualClock creates a manual clock at 0 whose origin is wallOrigin on the wall. Errors: an
// *Error matching ErrInvalidInput (field wall_origin) when wallOrigin is before the Unix epoch
// or after 2262-04-11 (the C ABI counts unsigned nanoseconds since 1970; time.Time.UnixNano is
// undefined past 2262), rather than silently moving the origin.
func NewManualClock(wallOrigin time.Time) (*ManualClock, error) {
	ns, err := wallNanos("wall_origin", wallOrigin)
	if err != nil {
		return nil, err
	}
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_manual(ns, &p); st != C.HOLDOFF_STATUS_OK {
		return nil, errOf(st)
	}
	c := &ManualClock{}
	c.h.init(p, &kindManualClock)
	c.h.cleanup = runtime.AddCleanup(c, freeClock, p)
	return c, nil
}

func (c *ManualClock) ref() *handleRef[*C.holdoff_clock] {
	if c == nil {
		return nil
	}
	return &c.h
}

// Set moves the clock to the time to since its origin. Errors: ErrClockBackwards if to is
// earlier than the clock shows (it does not move); ErrInvalidInput naming to when it is
// negative, or clock for a nil c.
func (c *ManualClock) Set(to time.Duration) error {
	if c == nil {
		return nilErr("clock")
	}
	ns, ok := nanos(to)
	if !ok {
		return inputErr("to", "must not be negative")
	}
	h, err := c.h.acquire()
	if err != nil {
		return err
	}
	defer c.h.release()
	if err := errOf(C.holdoff_clock_set(h, ns)); err != nil {
		return err
	}
	c.fireDue(h)
	return nil
}

// Advance moves the clock forward by by (saturating). Errors: ErrInvalidInput naming by when
// it is negative, or clock for a nil c.
func (c *ManualClock) Advance(by time.Duration) error {
	if c == nil {
		return nilErr("clock")
	}
	ns, ok := nanos(by)
	if !ok {
		return inputErr("by", "must not be negative")
	}
	h, err := c.h.acquire()
	if err != nil {
		return err
	}
	defer c.h.release()
	if err := errOf(C.holdoff_clock_advance(h, ns)); err != nil {
		return err
	}
	c.fireDue(h)
	return nil
}

// afterFunc runs fire (on the goroutine that moves the clock) once the clock shows d more
// than it does now, unless stop is called first; stop reports whether it prevented it. After
// Close the clock cannot move, so the timer never fires.
func (c *ManualClock) afterFunc(d time.Duration, fire func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: ^uint64(0), fire: fire}
	if h, err := c.h.acquire(); err == nil {
		var now C.uint64_t
		C.holdoff_clock_now(h, &now)
		c.h.release()
		t.at = uint64(now) + uint64(d)
		if t.at < uint64(now) { // the clock's axis saturates, and so does the timer
			t.at = ^uint64(0)
		}
	}
	if c.timers == nil {
		c.timers = map[*manualTimer]struct{}{}
	}
	c.timers[t] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, pending := c.timers[t]
		delete(c.timers, t)
		return pending
	}
}

// fireDue runs the timers the clock has reached. Reading the time under the lock orders it
// with afterFunc's reading: a timer set before this move is due from its own start.
func (c *ManualClock) fireDue(h *C.holdoff_clock) {
	c.mu.Lock()
	var now C.uint64_t
	C.holdoff_clock_now(h, &now)
	var due []*manualTimer
	for t := range c.timers {
		if t.at <= uint64(now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.fire()
	}
}

// Now is the clock's time since its origin.
func (c *ManualClock) Now() time.Duration {
	if c == nil {
		nilPanic("clock")
	}
	var ns C.uint64_t
	C.holdoff_clock_now(c.h.mustAcquire(), &ns)
	c.h.release()
	return dur(ns)
}

// WallNow is the wall time that corresponds to Now.
func (c *ManualClock) WallNow() time.Time {
	if c == nil {
		nilPanic("clock")
	}
	var ns C.uint64_t
	C.holdoff_clock_wall_now(c.h.mustAcquire(), &ns)
	c.h.release()
	return time.Unix(0, int64(dur(ns))).UTC()
}

// Close releases the clock's handle; objects built with it keep using it.
func (c *ManualClock) Close() error {
	if c == nil {
		return nilErr("clock")
	}
	c.h.close()
	return nil
}

// Option configures a constructor.
type Option func(*options)

type options struct {
	clock      Clock
	maxKeys    int
	hasMaxKeys bool
	call       callOptions
}

func optionsOf(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// clockOf is the clock the options name, nil for none; without options, nothing escapes.
func clockOf(opts []Option) Clock {
	if len(opts) == 0 {
		return nil
	}
	return optionsOf(opts).clock
}

// WithClock makes the object read clock instead of a system clock (a new one for each object,
// except breakers, which share one). A nil *ManualClock or
// *SystemClock is refused by the constructor (an *Error matching ErrInvalidInput, field
// clock); a nil Clock is no option.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithMaxKeys bounds the group NewBreakerGroup builds to n breakers (1..MaxKeysLimit; without
// it, DefaultMaxKeys). Any other n, 0 included, is refused by the core (an *Error matching
// ErrInvalidConfig, field group.max_keys), never taken as the default. Config.NewBreakerGroup
// refuses it (its configuration holds the bound); constructors of other objects ignore it, as
// they ignore the options of Do and DoHTTP (WithSleeper, WithAttemptTimeout, ...).
func WithMaxKeys(n int) Option { return func(o *options) { o.maxKeys, o.hasMaxKeys = n, true } }

// withClock runs f with the clock handle the options name, or a temporary system clock
// (released after f: the objects built keep it alive).
func withClock(opts []Option, f func(*C.holdoff_clock) error) error {
	o := optionsOf(opts)
	if o.clock != nil {
		r := o.clock.ref()
		if r == nil {
			return nilErr("clock")
		}
		h, err := r.acquire()
		if err != nil {
			return err
		}
		defer r.release()
		return f(h)
	}
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_system(&p); st != C.HOLDOFF_STATUS_OK {
		return errOf(st)
	}
	defer C.holdoff_clock_free(p)
	return f(p)
}

// breakerClock is the system clock of every breaker made without WithClock, nil if it could
// not be made: one clock per breaker would give each breaker an allocation of its own in the
// library, for readings that are all alike (a breaker reads no wall time, and its times are
// differences on one clock). Never freed; LiveHandles leaves it out.
var breakerClock = sync.OnceValue(func() *C.holdoff_clock {
	var p *C.holdoff_clock
	if C.holdoff_clock_new_system(&p) != C.HOLDOFF_STATUS_OK {
		return nil
	}
	breakerClockOffset, breakerClockMapped = clockOffset(p)
	breakerClockMade.Store(true)
	return p
})

// monotonicNow is a reading of the Go runtime's monotonic clock (ns; CLOCK_MONOTONIC on Linux,
// the clock the library's system clock reads). It is the real clock even inside a
// testing/synctest bubble, where time.Now and time.Since read the bubble's fake clock, which
// a test may move anywhere: a refusal decided on that could refuse past the library's
// deadline. The runtime keeps this symbol for packages that link to it (go.dev/issue/67401).
//
//go:linkname monotonicNow runtime.nanotime
func monotonicNow() int64

// breakerClockOffset (ns) maps monotonicNow onto breakerClock's readings, when
// breakerClockMapped; both are set once, with breakerClock, and only read after.
var (
	breakerClockOffset int64
	breakerClockMapped bool
)

// nowOnBreakerClock is a reading of breakerClock (ns since its origin) made from Go's monotonic
// clock, never earlier than the library's own reading at the same moment (see clockOffset): a
// refusal decided on it can only fall back to the library early, never refuse past a deadline.
func nowOnBreakerClock() uint64 {
	return uint64(max(monotonicNow()+breakerClockOffset, 0))
}

// clockOffset measures the offset from monotonicNow's readings to those of c, a system clock:
// on Linux both read CLOCK_MONOTONIC, so it is one constant. Each try reads Go's clock, then
// c; as c's reading comes after Go's, reading minus Go's is the true offset plus the time
// between the two readings, never less: the smallest of a few tries is the closest. ok is
// false if c cannot be read.
func clockOffset(c *C.holdoff_clock) (offset int64, ok bool) {
	offset = math.MaxInt64
	for range 16 {
		g := monotonicNow()
		var ns C.uint64_t
		if C.holdoff_clock_now(c, &ns) != C.HOLDOFF_STATUS_OK {
			return 0, false
		}
		offset = min(offset, int64(ns)-g)
	}
	return offset, true
}

// breakerClockMade reports whether breakerClock has made its clock.
var breakerClockMade atomic.Bool

var kindSystemClock = handleKind[*C.holdoff_clock]{"SystemClock", freeClock}

var kindManualClock = handleKind[*C.holdoff_clock]{"ManualClock", freeClock}
