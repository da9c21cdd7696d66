package holdoff

// #include "holdoff.h"
import "C"

import (
	"context"
	"math"
	"runtime"
	"time"
)

// Clock is the time source of breakers, budgets and policies: a SystemClock in production, a
// ManualClock in tests. A policy's breaker and budget must share one.
type Clock interface {
	alive() error
	handle() *C.holdoff_clock
	keepAlive()
}

// SystemClock reads the process's monotonic clock.
type SystemClock struct {
	ptr     *C.holdoff_clock
	cleanup runtime.Cleanup
}

// NewSystemClock creates a system clock (its origin is now).
func NewSystemClock() *SystemClock {
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_system(&p); st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	c := &SystemClock{ptr: p}
	c.cleanup = runtime.AddCleanup(c, freeClock, p)
	return c
}

func freeClock(p *C.holdoff_clock) { C.holdoff_clock_free(p) }

// alive is nil, or an error matching ErrClosed once Close has run.
func (c *SystemClock) alive() error {
	if c.ptr == nil {
		return closedErr("SystemClock")
	}
	return nil
}

func (c *SystemClock) handle() *C.holdoff_clock {
	if c.ptr == nil {
		closedPanic("SystemClock")
	}
	return c.ptr
}

func (c *SystemClock) keepAlive() { runtime.KeepAlive(c) }

// Close releases the clock's handle; objects built with it keep using it.
func (c *SystemClock) Close() error {
	if c.ptr != nil {
		c.cleanup.Stop()
		C.holdoff_clock_free(c.ptr)
		c.ptr = nil
	}
	return nil
}

// ManualClock moves only when told to: for tests and simulations. Times are durations since
// its origin (0 at creation); WallOrigin is the wall time at the origin, used only for
// Retry-After HTTP-dates.
type ManualClock struct {
	ptr     *C.holdoff_clock
	cleanup runtime.Cleanup
}

// NewManualClock creates a manual clock at 0 whose origin is wallOrigin on the wall. Errors: an
// *Error matching ErrInvalidInput (field wall_origin) when wallOrigin is before the Unix epoch
// or after 2262-04-11 (the C ABI counts unsigned nanoseconds since 1970; time.Time.UnixNano is
// undefined past 2262), rather than silently moving the origin.
func NewManualClock(wallOrigin time.Time) (*ManualClock, error) {
	if wallOrigin.Before(time.Unix(0, 0)) || wallOrigin.After(time.Unix(0, math.MaxInt64)) {
		return nil, inputErr("wall_origin", "must be between 1970-01-01 and 2262-04-11 UTC")
	}
	ns := wallOrigin.UnixNano()
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_manual(C.uint64_t(ns), &p); st != C.HOLDOFF_STATUS_OK {
		return nil, errOf(st)
	}
	c := &ManualClock{ptr: p}
	c.cleanup = runtime.AddCleanup(c, freeClock, p)
	return c, nil
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (c *ManualClock) alive() error {
	if c.ptr == nil {
		return closedErr("ManualClock")
	}
	return nil
}

func (c *ManualClock) handle() *C.holdoff_clock {
	if c.ptr == nil {
		closedPanic("ManualClock")
	}
	return c.ptr
}

func (c *ManualClock) keepAlive() { runtime.KeepAlive(c) }

// Set moves the clock to t since its origin. Errors: ErrClockBackwards if t is earlier than
// the clock shows (it does not move); ErrInvalidInput for a negative t.
func (c *ManualClock) Set(t time.Duration) error {
	if err := c.alive(); err != nil {
		return err
	}
	ns, ok := nanos(t)
	if !ok {
		return inputErr("to", "must not be negative")
	}
	defer runtime.KeepAlive(c)
	return errOf(C.holdoff_clock_set(c.handle(), ns))
}

// Advance moves the clock forward by d (saturating). Errors: ErrInvalidInput for a negative d.
func (c *ManualClock) Advance(d time.Duration) error {
	if err := c.alive(); err != nil {
		return err
	}
	ns, ok := nanos(d)
	if !ok {
		return inputErr("by", "must not be negative")
	}
	defer runtime.KeepAlive(c)
	return errOf(C.holdoff_clock_advance(c.handle(), ns))
}

// Now is the clock's time since its origin.
func (c *ManualClock) Now() time.Duration {
	var ns C.uint64_t
	C.holdoff_clock_now(c.handle(), &ns)
	runtime.KeepAlive(c)
	return dur(ns)
}

// WallNow is the wall time that corresponds to Now.
func (c *ManualClock) WallNow() time.Time {
	var ns C.uint64_t
	C.holdoff_clock_wall_now(c.handle(), &ns)
	runtime.KeepAlive(c)
	return time.Unix(0, int64(dur(ns))).UTC()
}

// Close releases the clock's handle; objects built with it keep using it.
func (c *ManualClock) Close() error {
	if c.ptr != nil {
		c.cleanup.Stop()
		C.holdoff_clock_free(c.ptr)
		c.ptr = nil
	}
	return nil
}

// Option configures a constructor.
type Option func(*options)

type options struct {
	clock Clock
	sleep func(context.Context, time.Duration) error
}

// WithClock makes the object read clock instead of a new system clock.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// withClock runs f with the clock handle the options name, or a temporary system clock
// (released after f: the objects built keep it alive).
func withClock(opts []Option, f func(*C.holdoff_clock) error) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock != nil {
		if err := o.clock.alive(); err != nil {
			return err
		}
		defer o.clock.keepAlive()
		return f(o.clock.handle())
	}
	var p *C.holdoff_clock
	if st := C.holdoff_clock_new_system(&p); st != C.HOLDOFF_STATUS_OK {
		return errOf(st)
	}
	defer C.holdoff_clock_free(p)
	return f(p)
}
