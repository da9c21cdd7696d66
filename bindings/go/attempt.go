package holdoff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// OutcomeError marks an error with the outcome the breaker and budget should count for it.
// Return one from the function given to Do to say more than "failure".
type OutcomeError struct {
	Outcome Outcome
	Err     error
}

func (e *OutcomeError) Error() string {
	if e.Err == nil {
		return "holdoff: " + e.Outcome.Kind.String()
	}
	return e.Err.Error()
}

func (e *OutcomeError) Unwrap() error { return e.Err }

// AsAnswer marks err as an answer: the upstream is reachable but retrying will not help (a
// 404, a validation error). Not retried; it proves the upstream reachable. Do returns err
// itself (the *OutcomeError).
func AsAnswer(err error) error { return &OutcomeError{Outcome: Answer, Err: err} }

// AsRetryLater marks err as the upstream asking to be left alone for d (a 429 or 503 with
// Retry-After): the breaker opens for d and the budget waits it. A negative d is the caller's
// error: the helpers then count the attempt as nothing and return an error matching
// ErrInvalidInput (field outcome.delay) joined with err.
func AsRetryLater(d time.Duration, err error) error {
	return &OutcomeError{Outcome: RetryLaterOutcome(d), Err: err}
}

// OutcomeOf is Go's default classification of what an attempt returned, ctx being the
// caller's context: nil is a success; an *OutcomeError says its own outcome; once the
// caller's ctx has ended, its context.Canceled is a cancellation and its
// context.DeadlineExceeded a timeout; an error matching context.DeadlineExceeded, or a
// net.Error whose Timeout() is true, is a timeout; any other error (a *net.OpError, a
// *url.Error, io.ErrUnexpectedEOF, a context.Canceled not from ctx) is a failure. A deadline
// is never a cancellation. Do and DoHTTP add one rule: an attempt that fails after its own
// time limit passed is a timeout, whatever its error.
func OutcomeOf(ctx context.Context, err error) Outcome {
	if err == nil {
		return Success
	}
	var oe *OutcomeError
	if errors.As(err, &oe) {
		return oe.Outcome
	}
	if ctx != nil {
		switch ctx.Err() {
		case context.Canceled:
			return Cancelled
		case context.DeadlineExceeded:
			return Timeout
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return Timeout
	}
	return Failure
}

// ClassifyFunc overrides the default classification (OutcomeOf) of an attempt: it is given
// what fn returned (err nil when it returned normally: Do's fn returned nil) and says which
// outcome that is, or ok false for the default. An outcome of Cancelled is the caller's
// cancellation. DoHTTP asks it only about errors; its responses are classified by the
// policy's Classifier (ClassifierConfig). A panic in it is a programming error, as one in fn;
// so is an outcome of an unknown kind (the call returns an error matching ErrInvalidInput).
type ClassifyFunc func(err error) (o Outcome, ok bool)

// attempted is what an attempt came to, in the C ABI's holdoff_attempted codes.
type attempted uint32

const (
	attemptReturned  attempted = 0 // HOLDOFF_ATTEMPTED_RETURNED
	attemptRaised    attempted = 1 // HOLDOFF_ATTEMPTED_RAISED
	attemptCancelled attempted = 2 // HOLDOFF_ATTEMPTED_CANCELLED
	attemptBug       attempted = 3 // HOLDOFF_ATTEMPTED_BUG
)

// classify says what an attempt that ended with err came to; timedOut reports that its own
// time limit passed; ctx is the caller's context. An attempt cut by its limit is a timeout,
// unless the caller has cancelled meanwhile: its cancellation always ends the call (the core
// records that attempt as the timeout it was).
func classify(ctx context.Context, timedOut bool, err error, custom ClassifyFunc) (attempted, Outcome) {
	if err != nil && timedOut {
		if ctx != nil && ctx.Err() == context.Canceled {
			return attemptCancelled, Cancelled
		}
		return attemptRaised, Timeout
	}
	o, ok := Outcome{}, false
	if custom != nil {
		o, ok = custom(err)
	}
	if !ok {
		o = OutcomeOf(ctx, err)
	}
	switch {
	case o.Kind == KindCancelled:
		return attemptCancelled, o
	case err == nil:
		return attemptReturned, o
	}
	return attemptRaised, o
}

// errAttemptDeadline is the cause of an attempt context ended by the attempt's time limit.
var errAttemptDeadline = fmt.Errorf("holdoff: the attempt's time limit passed: %w", context.DeadlineExceeded)

// attemptContext is one attempt's own context, a child of the caller's: its Err is
// context.DeadlineExceeded once the attempt's time limit has passed (context.Cause says
// which limit), and its Deadline is that limit's on the system clock.
type attemptContext struct {
	context.Context // a context.WithCancelCause child of the caller's
	deadline        time.Time
}

func (c *attemptContext) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	if !c.deadline.IsZero() && (!ok || c.deadline.Before(d)) {
		return c.deadline, true
	}
	return d, ok
}

func (c *attemptContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == errAttemptDeadline {
		return context.DeadlineExceeded
	}
	return err
}

// attemptTimer is the running time limit of one attempt.
type attemptTimer struct {
	ctx    *attemptContext
	cancel context.CancelCauseFunc
	stop   func() bool // stops the timer; false once it has fired
}

// startAttempt gives an attempt its own context, bounded by limit (when has) on clock (a
// ManualClock moves it; nil runs it on the system clock).
func startAttempt(ctx context.Context, clock *ManualClock, limit time.Duration, has bool) *attemptTimer {
	inner, cancel := context.WithCancelCause(ctx)
	t := &attemptTimer{ctx: &attemptContext{Context: inner}, cancel: cancel, stop: func() bool { return true }}
	fire := func() { cancel(errAttemptDeadline) }
	switch {
	case !has:
	case clock != nil:
		t.stop = clock.afterFunc(limit, fire)
	default:
		t.ctx.deadline = time.Now().Add(limit)
		t.stop = time.AfterFunc(limit, fire).Stop
	}
	return t
}

// end stops the timer when the attempt is over and reports whether its limit had passed. The
// context stays alive for a response's body: release ends it.
func (t *attemptTimer) end() (timedOut bool) {
	t.stop()
	return context.Cause(t.ctx.Context) == errAttemptDeadline
}

// release ends the attempt's context.
func (t *attemptTimer) release() { t.cancel(context.Canceled) }

// releasingBody ends a response's attempt context when its body is closed, so that the body
// can be read after the attempt is over.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
