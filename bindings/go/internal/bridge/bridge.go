// Package bridge connects package holdoff to its OpenTelemetry adapter
// (holdoff.dev/go/otelmetric) without package holdoff importing OpenTelemetry: the adapter
// installs a Tracer when it is linked in, and builds holdoff's typed errors through
// InvalidInput, which package holdoff sets at start-up.
package bridge

import (
	"context"
	"sync/atomic"
	"time"
)

// Retry is one wait the retry helpers (Policy.Do, Policy.DoHTTP) decided before a retry.
type Retry struct {
	// Attempt is the attempt that just ended, 1 for the first.
	Attempt int
	// Outcome is what that attempt was recorded as (success, answer, failure, timeout,
	// retry_later, cancelled); "" if none was.
	Outcome string
	// Delay is the wait.
	Delay time.Duration
	// Source is where the delay came from: retry_after, backoff or breaker.
	Source string
	// Capped reports that the budget's cap shortened the server's delay.
	Capped bool
}

// GiveUp is the end of a call in a *GiveUpError or a *BreakerOpenError.
type GiveUp struct {
	// Attempts is the attempts made (0 when the breaker refused the first).
	Attempts int
	// Reason is the give-up reason's name, as holdoff.retry.give_ups names it.
	Reason string
}

// Tracer is told of every decided wait and give-up of the retry helpers, on the calling
// goroutine, with the caller's context. A call that succeeds at its first attempt tells it
// nothing.
type Tracer interface {
	Retry(ctx context.Context, r Retry)
	GiveUp(ctx context.Context, g GiveUp)
}

var tracer atomic.Pointer[Tracer]

// SetTracer installs t (nil removes it) and returns the one it replaces.
func SetTracer(t Tracer) (old Tracer) {
	var p *Tracer
	if t != nil {
		p = &t
	}
	if prev := tracer.Swap(p); prev != nil {
		return *prev
	}
	return nil
}

// CurrentTracer is the installed Tracer, or nil.
func CurrentTracer() Tracer {
	if p := tracer.Load(); p != nil {
		return *p
	}
	return nil
}

// InvalidInput makes holdoff's *Error matching ErrInvalidInput, naming field; set by package
// holdoff's init, so it is there before any package importing holdoff runs.
var InvalidInput func(field, rule string) error
