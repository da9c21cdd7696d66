package holdoff

// #include <stdlib.h>
// #include "holdoff.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"holdoff.dev/go/internal/bridge"
)

// NoLimit lifts a time limit: WithAttemptTimeout(NoLimit), WithTotalTimeout(NoLimit).
const NoLimit time.Duration = math.MaxInt64

// DefaultTotalTimeout bounds a Do or DoHTTP call, waits included, unless WithTotalTimeout says
// otherwise: a call to an unreachable upstream ends within a minute.
const DefaultTotalTimeout = time.Duration(C.HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS)

// callOptions are the options of one Do or DoHTTP call.
type callOptions struct {
	sleep                        func(context.Context, time.Duration) error
	attemptTimeout, totalTimeout time.Duration
	hasAttempt, hasTotal         bool
	onRetry                      func(RetryInfo)
	onAttempt                    func(AttemptInfo)
	classify                     ClassifyFunc
}

// WithSleeper replaces the timer that Do and DoHTTP wait with between attempts (tests pass one
// that advances a ManualClock). It is called on the calling goroutine, after OnRetry, and must
// return ctx.Err() if ctx (the caller's) ends first; any error it returns ends the call with
// that error. Attempt time limits do not use it: they run on the policy's clock.
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(o *options) { o.call.sleep = sleep }
}

// WithAttemptTimeout bounds each attempt of Do and DoHTTP (default: no limit, only the total
// timeout bounds it). d must be greater than 0, or NoLimit: zero and negative durations are
// refused (an *Error matching ErrInvalidConfig, field execute.attempt_timeout). The attempt's
// context ends with context.DeadlineExceeded when it passes, and the attempt counts as a
// timeout, never as a cancellation.
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) { o.call.attemptTimeout, o.call.hasAttempt = d, true }
}

// WithTotalTimeout bounds a whole Do or DoHTTP call, waits and attempts included (default
// DefaultTotalTimeout, 60 s; a deadline of the caller's context shortens it). d must be greater
// than 0, or NoLimit (only the budget bounds the call): zero and negative durations are
// refused (field execute.total_timeout). A retry whose wait would not end within it gives up
// at once (reason TotalTimeout); the last attempt gets what is left.
func WithTotalTimeout(d time.Duration) Option {
	return func(o *options) { o.call.totalTimeout, o.call.hasTotal = d, true }
}

// WithOnRetry sets a hook called before each wait (tenacity's before_sleep, Polly's OnRetry),
// on the calling goroutine.
func WithOnRetry(f func(RetryInfo)) Option { return func(o *options) { o.call.onRetry = f } }

// WithOnAttempt sets a hook called after each attempt, with what it was recorded as, on the
// calling goroutine (also for an attempt that panicked, before the panic goes on, and one the
// helper failed to report, such as a classifier's unknown outcome kind: Cancelled).
func WithOnAttempt(f func(AttemptInfo)) Option { return func(o *options) { o.call.onAttempt = f } }

// WithClassifier overrides Go's default classification (OutcomeOf) of what fn returned.
func WithClassifier(c ClassifyFunc) Option { return func(o *options) { o.call.classify = c } }

// AttemptInfo is what the WithOnAttempt hook is shown after each attempt.
type AttemptInfo struct {
	// Number is the attempt's number, 1 for the first.
	Number int
	// Probe reports whether the attempt was a probe of an open breaker.
	Probe bool
	// Outcome is what the attempt was recorded as: a panic, a cancelled attempt, a status
	// that is not one and an outcome the helper could not report (a classifier's unknown kind,
	// a negative retry-later delay) are Cancelled (they move nothing).
	Outcome Outcome
	// Err is the error fn returned (nil if it returned normally or panicked).
	Err error
	// Response is the response fn returned (DoHTTP). Leave its Body alone.
	Response *http.Response
}

// RetryInfo is what the WithOnRetry hook is shown before each wait.
type RetryInfo struct {
	// Attempts is the attempts made so far.
	Attempts int
	// Delay is the wait: never shorter than the server asked, up to the budget's cap.
	Delay time.Duration
	// Source is where Delay came from (FromBackoff, FromRetryAfter, FromBreaker).
	Source WaitSource
	// Capped reports that the budget's cap shortened the server's delay.
	Capped bool
	// ServerDelay is the server's own delay before the cap (HasServerDelay).
	ServerDelay    time.Duration
	HasServerDelay bool
	// Err is the last attempt's error; Response its response (DoHTTP), whose Body is closed.
	Err      error
	Response *http.Response
}

// limit is one time limit for the C ABI; field names it in errors.
func limit(field string, d time.Duration, set bool) (C.uint32_t, C.uint64_t, error) {
	switch {
	case !set:
		return C.HOLDOFF_LIMIT_DEFAULT, 0, nil
	case d == NoLimit:
		return C.HOLDOFF_LIMIT_NONE, 0, nil
	case d < 0: // the core's rule for 0; a negative value cannot cross the C ABI
		return 0, 0, &Error{Name: "invalid_config", Field: field, status: C.HOLDOFF_STATUS_INVALID_CONFIG,
			Message: "invalid configuration: " + field + ": must be greater than 0"}
	}
	return C.HOLDOFF_LIMIT_SET, C.uint64_t(d), nil // 0 is refused by the core, naming field
}

// cOptions are the time limits for holdoff_execution_new; deadline (when has) shortens the
// total timeout.
func (o *callOptions) cOptions(deadline time.Time, has bool) (C.holdoff_execution_options, error) {
	var c C.holdoff_execution_options
	C.holdoff_execution_options_init(&c)
	var err error
	if c.attempt_timeout, c.attempt_timeout_ns, err = limit("execute.attempt_timeout", o.attemptTimeout, o.hasAttempt); err != nil {
		return c, err
	}
	if c.total_timeout, c.total_timeout_ns, err = limit("execute.total_timeout", o.totalTimeout, o.hasTotal); err != nil {
		return c, err
	}
	if !has {
		return c, nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return c, context.DeadlineExceeded
	}
	switch c.total_timeout {
	case C.HOLDOFF_LIMIT_DEFAULT:
		c.total_timeout_ns = C.HOLDOFF_EXECUTION_DEFAULT_TOTAL_TIMEOUT_NS
	case C.HOLDOFF_LIMIT_NONE:
		c.total_timeout_ns = C.uint64_t(left)
	}
	c.total_timeout = C.HOLDOFF_LIMIT_SET
	c.total_timeout_ns = min(c.total_timeout_ns, C.uint64_t(left))
	return c, nil
}

// newExecution starts a logical call under the policy handle h. Errors: invalid limits, named
// by the core and worded for Go (the option's name, the duration given).
func (o *callOptions) newExecution(h *C.holdoff_policy, deadline time.Time, has bool) (*C.holdoff_execution, error) {
	c, err := o.cOptions(deadline, has)
	if err != nil {
		return nil, o.inGoTerms(err)
	}
	var x *C.holdoff_execution
	if err := detailed(func() C.holdoff_status { return C.holdoff_execution_new(h, &c, &x) }); err != nil {
		return nil, o.inGoTerms(err)
	}
	return x, nil
}

// inGoTerms words an error about the options' limits for Go, with the durations given.
func (o *callOptions) inGoTerms(err error) error {
	given := map[string]any{}
	if o.hasAttempt {
		given["attempt_timeout"] = o.attemptTimeout
	}
	if o.hasTotal {
		given["total_timeout"] = o.totalTimeout
	}
	return inGoTerms(err, map[string]any{"execute": given})
}

// check has the core check the options' limits (an execution that never starts moves nothing).
func (o *callOptions) check(h *C.holdoff_policy) error {
	x, err := o.newExecution(h, time.Time{}, false)
	if err == nil {
		C.holdoff_execution_free(x)
	}
	return err
}

// ExecuteOptions returns the time limits of the configuration's execute part
// (attempt_timeout_ms, total_timeout_ms; null is NoLimit; the defaults when absent) as
// options for NewPolicy, Do and DoHTTP. Errors: an *Error matching ErrInvalidConfig naming the
// field for a limit longer than time.Duration holds (about 292 years).
func (c *Config) ExecuteOptions() ([]Option, error) {
	var o C.holdoff_execution_options
	if err := c.call(func(h *C.holdoff_config) C.holdoff_status {
		return C.holdoff_config_execution_options(h, &o)
	}); err != nil {
		return nil, err
	}
	var opts []Option
	for _, l := range []struct {
		kind  C.uint32_t
		ns    C.uint64_t
		field string
		opt   func(time.Duration) Option
	}{
		{o.attempt_timeout, o.attempt_timeout_ns, "execute.attempt_timeout", WithAttemptTimeout},
		{o.total_timeout, o.total_timeout_ns, "execute.total_timeout", WithTotalTimeout},
	} {
		switch {
		case l.kind == C.HOLDOFF_LIMIT_NONE:
			opts = append(opts, l.opt(NoLimit))
		case l.kind != C.HOLDOFF_LIMIT_SET:
		case uint64(l.ns) >= uint64(NoLimit):
			return nil, &Error{Name: "invalid_config", Field: l.field, status: C.HOLDOFF_STATUS_INVALID_CONFIG,
				Message: "invalid configuration: " + l.field + ": must fit in a time.Duration (about 292 years)"}
		default:
			opts = append(opts, l.opt(time.Duration(l.ns)))
		}
	}
	return opts, nil
}

// Do runs fn under the policy until it succeeds or the policy stops, each attempt with its own
// context (a child of ctx, ended when the attempt ends, with the attempt's time limit), and
// waits between attempts as the core says (backoff, Retry-After, the breaker), on a timer that
// ctx cancels. The core decides everything; Do classifies what fn returned (OutcomeOf, or
// WithClassifier) and turns the end of the call into Go's result:
//
//   - nil: the last attempt's fn returned nil, a success (or what WithClassifier calls an
//     answer);
//   - fn's own error, unchanged: an error classified as an answer (AsAnswer), or as a success;
//   - a *BreakerOpenError: the breaker refused the first attempt, or a retry it would keep
//     waiting for past the budget or the total timeout;
//   - a *GiveUpError (Reason, Attempts, RetryAfter, ServerDelay, Capped; it unwraps to the
//     last error): retries, budget or quota spent, the total timeout, a Retry-After above
//     the cap;
//   - ctx.Err(): ctx ended before the call started, or was cancelled during an attempt (also
//     one that ran past its limit: the breaker counts that attempt as a timeout) or a wait (a
//     deadline of ctx during an attempt is a timeout, counted as such);
//   - an error matching ErrInvalidInput: an AsRetryLater with a negative delay (the attempt
//     counts as nothing); an *Error matching ErrInvalidConfig: invalid time limits.
//
// Both "upstream unavailable" errors match errors.Is(err, ErrUpstreamUnavailable). A panic in
// fn (or in the classifier) is a programming error: the attempt is recorded as cancelled (it
// moves nothing, also past its time limit, and a probe frees its slot), OnAttempt sees it, and
// the panic goes on, unretried. So is a classifier's outcome of an unknown kind: the call
// returns an error matching ErrInvalidInput (field outcome.kind) joined with fn's error. opts
// override the policy's defaults (PolicyOption). A nil p, ctx or fn is an *Error matching
// ErrInvalidInput naming it (policy, ctx, fn); nothing is attempted.
func (p *Policy) Do(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	var attempt func(context.Context) (*http.Response, error) // nil for a nil fn: execute refuses it
	if fn != nil {
		attempt = func(ctx context.Context) (*http.Response, error) { return nil, fn(ctx) }
	}
	_, err := p.execute(ctx, opts, false, attempt)
	return err
}

// DoHTTP is Do for HTTP: fn makes one request with the context it is given (an attempt's
// own) and returns the client's response or error. A response is classified by the policy's
// Classifier at once, headers included (Retry-After and the other delay hints, x-should-retry;
// a status outside 100..599 is a failure); an error as Do classifies it (a client timeout is a
// timeout). The bodies of responses retried are closed (the hooks see their status and
// headers). It returns:
//
//   - (resp, nil) for the last response when it is a success or a final answer (a 404, a 501):
//     close its body; its attempt's context ends when you do;
//   - (nil, err) otherwise, with err as for Do; a *GiveUpError or *BreakerOpenError after a
//     response carries it in Response (close its Body);
//   - (nil, an *Error matching ErrInvalidInput naming status) when a response's StatusCode
//     is not an HTTP status (outside 0..999), or naming response when fn returned neither a
//     response nor an error; that attempt counts as nothing;
//   - (nil, an *Error matching ErrInvalidInput naming policy, ctx or fn) when it is nil;
//     nothing is attempted.
func (p *Policy) DoHTTP(ctx context.Context, fn func(context.Context) (*http.Response, error), opts ...Option) (*http.Response, error) {
	return p.execute(ctx, opts, true, fn)
}

// attemptResult is what one attempt left: fn's error or response (one of them).
type attemptResult struct {
	err   error
	resp  *http.Response
	timer *attemptTimer
}

// release closes a response's body (emptied) and ends the attempt's context: the call has
// moved past it.
func (a *attemptResult) release() {
	if a.resp != nil && a.resp.Body != nil && a.resp.Body != http.NoBody {
		a.resp.Body.Close()
		a.resp.Body = http.NoBody
	}
	if a.timer != nil {
		a.timer.release()
	}
}

// handOver makes the response's body end the attempt's context when closed (it is the
// caller's now).
func (a *attemptResult) handOver() {
	if a.resp == nil || a.resp.Body == nil || a.resp.Body == http.NoBody {
		a.release()
		return
	}
	a.resp.Body = &releasingBody{ReadCloser: a.resp.Body, release: a.timer.release}
}

// call is one logical call in progress: the core's execution and what the helper keeps.
type call struct {
	p    *Policy
	ctx  context.Context
	o    callOptions
	http bool
	fn   func(context.Context) (*http.Response, error)
	x    *C.holdoff_execution
	step C.holdoff_step
	last attemptResult
}

// execute is the one retry loop of Do and DoHTTP: the core's execution, driven as
// holdoff_execution_next_step says (attempt, wait, finish).
func (p *Policy) execute(ctx context.Context, opts []Option, isHTTP bool, fn func(context.Context) (*http.Response, error)) (*http.Response, error) {
	switch {
	case p == nil:
		return nil, nilErr("policy")
	case ctx == nil:
		return nil, nilErr("ctx")
	case fn == nil:
		return nil, nilErr("fn")
	}
	o := options{call: p.call}
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock != nil || o.hasMaxKeys {
		return nil, &Error{Name: "invalid_config", Field: "options", status: C.HOLDOFF_STATUS_INVALID_CONFIG,
			Message: "invalid configuration: options: WithClock and WithMaxKeys configure constructors, not calls"}
	}
	if o.call.sleep == nil {
		o.call.sleep = sleepTimer
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The execution keeps the core's policy alive: a Close meanwhile does not stop the call.
	h, err := p.h.acquire()
	if err != nil {
		return nil, err
	}
	deadline, has := ctx.Deadline()
	x, err := o.call.newExecution(h, deadline, has)
	p.h.release()
	if err != nil {
		return nil, err
	}
	// Freed however the call ends (freed during an attempt, it records the attempt as
	// cancelled).
	defer C.holdoff_execution_free(x)
	c := &call{p: p, ctx: ctx, o: o.call, http: isHTTP, fn: fn, x: x}
	if err := errOf(C.holdoff_execution_next_step(x, &c.step)); err != nil {
		return nil, err
	}
	var cancelled error
	for c.step.kind != C.HOLDOFF_STEP_KIND_FINISH {
		switch c.step.kind {
		case C.HOLDOFF_STEP_KIND_ATTEMPT:
			c.last.release()
			if err := c.attempt(); err != nil {
				return nil, err
			}
		case C.HOLDOFF_STEP_KIND_WAIT:
			c.last.release()
			if c.o.onRetry != nil {
				sd, hasSD := optDur(c.step.has_server_delay, c.step.server_delay_ns)
				c.o.onRetry(RetryInfo{Attempts: int(c.step.attempts), Delay: dur(c.step.delay_ns),
					Source: WaitSource(c.step.source), Capped: c.step.capped != 0, ServerDelay: sd,
					HasServerDelay: hasSD, Err: c.last.err, Response: c.last.resp})
			}
			if t := bridge.CurrentTracer(); t != nil {
				c.traceRetry(t)
			}
			if err := c.o.sleep(ctx, dur(c.step.delay_ns)); err != nil {
				cancelled = err
				if err := errOf(C.holdoff_execution_cancel(x, &c.step)); err != nil {
					return nil, err
				}
				continue
			}
			if err := errOf(C.holdoff_execution_next_step(x, &c.step)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("holdoff: unknown step kind %d: %w", c.step.kind, ErrInternal)
		}
	}
	c.traceGiveUp()
	return c.finish(cancelled)
}

// traceRetry tells the tracer (the span events of holdoff.dev/go/otelmetric) of the wait in
// c.step.
func (c *call) traceRetry(t bridge.Tracer) {
	r := bridge.Retry{Attempt: int(c.step.attempts), Delay: dur(c.step.delay_ns),
		Source: WaitSource(c.step.source).String(), Capped: c.step.capped != 0}
	if c.step.has_last_outcome != 0 {
		r.Outcome = OutcomeKind(c.step.last_outcome).String()
	}
	t.Retry(c.ctx, r)
}

// traceGiveUp tells the tracer of a call ending in a *GiveUpError or a *BreakerOpenError (also
// a first attempt refused). A call ending otherwise (a success, the upstream's answer, the
// caller cancelling) tells it nothing, and does not look the tracer up.
func (c *call) traceGiveUp() {
	var reason GiveUpReason
	switch s := &c.step; {
	case s.verdict == C.HOLDOFF_VERDICT_GIVE_UP && s.has_reason != 0:
		reason = GiveUpReason(s.reason)
	case s.verdict == C.HOLDOFF_VERDICT_BREAKER_OPEN:
		reason = BreakerOpenReason
	default:
		return
	}
	if t := bridge.CurrentTracer(); t != nil {
		t.GiveUp(c.ctx, bridge.GiveUp{Attempts: int(c.step.attempts), Reason: reason.String()})
	}
}

// attempt makes the attempt the step admitted, reports it to the core and leaves the next step
// in c.step. The helper failing to report it is a programming error, reported as a bug (recorded
// as cancelled, it moves nothing; never by freeing the execution, which past the attempt's limit
// would count a timeout), seen by OnAttempt: a panic in fn, the classifier or a response's
// Body.Close goes on once the attempt is recorded; an outcome the core refuses (a classifier's
// unknown kind, a negative retry-later delay) ends the call with that error (Rethrow).
func (c *call) attempt() error {
	info := AttemptInfo{Number: int(c.step.attempts), Probe: c.step.probe != 0}
	limit, has := optDur(c.step.has_time_limit, c.step.time_limit_ns)
	t := startAttempt(c.ctx, c.p.clock, limit, has)
	c.last = attemptResult{timer: t}
	reported := false
	defer func() {
		if reported {
			return
		}
		// fn, the classifier or a body's Close panicked (or exited the goroutine): not an
		// answer of the upstream. Recorded as cancelled, then the panic goes on.
		t.end()
		t.release()
		C.holdoff_execution_complete(c.x, C.uint32_t(attemptBug), C.HOLDOFF_OUTCOME_CANCELLED, 0, &c.step)
		c.afterAttempt(info)
	}()
	resp, err := c.fn(t.ctx)
	timedOut := t.end()
	info.Err = err
	c.last.err = err
	var kind attempted
	var outcome Outcome
	if !c.http || err != nil {
		kind, outcome = classify(c.ctx, timedOut, err, c.o.classify)
	}
	if err != nil && resp != nil && resp.Body != nil { // a response with an error is not one
		resp.Body.Close()
	}
	isResponse := c.http && err == nil && resp != nil
	if !isResponse { // only a response's body still needs the attempt's context
		t.release()
	}
	// bug reports the attempt as a programming error; failure is what the caller gets.
	bug := func(failure error) C.holdoff_status {
		c.last.err = failure
		return C.holdoff_execution_complete(c.x, C.uint32_t(attemptBug), C.HOLDOFF_OUTCOME_CANCELLED, 0, &c.step)
	}
	var st C.holdoff_status
	switch {
	case isResponse:
		info.Response, c.last.resp = resp, resp
		headers, n, free := cHeaders(HeadersOf(resp.Header))
		st = C.holdoff_execution_complete_response(c.x, C.int64_t(resp.StatusCode), headers, n, &c.step)
		free()
	case c.http && err == nil:
		st = bug(inputErr("response", "fn returned neither a response nor an error"))
	default:
		o, ns, oerr := outcome.c()
		if oerr == nil && outcome.Kind > KindCancelled {
			oerr = inputErr("outcome.kind", fmt.Sprintf("%d is not an outcome kind", uint32(outcome.Kind)))
		}
		if oerr != nil { // the caller's error (a negative retry-later delay, a classifier's garbage)
			st = bug(errors.Join(oerr, err))
			break
		}
		st = C.holdoff_execution_complete(c.x, C.uint32_t(kind), o, ns, &c.step)
	}
	if failure := errOf(st); failure != nil {
		// The core refused what the helper reported (the attempt stays in progress): a bug of
		// the helper's own, reported as such; the call ends with that error.
		failure = errors.Join(failure, c.last.err)
		if st := bug(failure); st != C.HOLDOFF_STATUS_OK {
			reported = true // freeing the execution is all that is left
			return errors.Join(errOf(st), failure)
		}
	}
	reported = true
	c.afterAttempt(info)
	return nil
}

// afterAttempt shows the OnAttempt hook what the completed attempt was recorded as.
func (c *call) afterAttempt(info AttemptInfo) {
	if c.o.onAttempt == nil {
		return
	}
	if c.step.has_last_outcome != 0 {
		info.Outcome = Outcome{Kind: OutcomeKind(c.step.last_outcome), Delay: dur(c.step.last_retry_later_ns)}
	}
	c.o.onAttempt(info)
}

// finish turns the core's verdict into Go's result; cancelled is the error of a wait the
// caller cancelled.
func (c *call) finish(cancelled error) (*http.Response, error) {
	s := &c.step
	last := &c.last
	unavailable := func() Unavailable {
		ra, hasRA := optDur(s.has_retry_after, s.retry_after_ns)
		sd, hasSD := optDur(s.has_server_delay, s.server_delay_ns)
		u := Unavailable{Reason: BreakerOpenReason, Attempts: int(s.attempts), RetryAfter: ra, HasRetryAfter: hasRA,
			ServerDelay: sd, HasServerDelay: hasSD, Capped: s.capped != 0}
		if s.has_reason != 0 {
			u.Reason = GiveUpReason(s.reason)
		}
		if s.attempts > 0 {
			u.Err, u.Response = last.err, last.resp
		}
		last.handOver()
		return u
	}
	switch s.verdict {
	case C.HOLDOFF_VERDICT_RETURN:
		last.handOver()
		return last.resp, nil
	case C.HOLDOFF_VERDICT_RETHROW:
		last.release()
		return nil, last.err
	case C.HOLDOFF_VERDICT_BREAKER_OPEN:
		e := &BreakerOpenError{Unavailable: unavailable()}
		// The state is read again, for the error's information only.
		if h, err := c.p.breaker.h.acquire(); err == nil {
			snap, _ := snapshotOf(h)
			c.p.breaker.h.release()
			e.State, e.Episode = snap.State, snap.Episode
		}
		return nil, e
	case C.HOLDOFF_VERDICT_GIVE_UP:
		return nil, &GiveUpError{Unavailable: unavailable()}
	case C.HOLDOFF_VERDICT_CANCELLED:
		last.release()
		switch {
		case cancelled != nil:
			return nil, cancelled
		case c.ctx.Err() != nil:
			return nil, c.ctx.Err()
		case last.err != nil: // a classifier called it a cancellation
			return nil, last.err
		}
		return nil, context.Canceled
	case C.HOLDOFF_VERDICT_INVALID_INPUT:
		status := 0
		if last.resp != nil {
			status = last.resp.StatusCode
		}
		last.release()
		return nil, inputErr("status", fmt.Sprintf("%d is not an HTTP status (0..999)", status))
	}
	last.release()
	return nil, fmt.Errorf("holdoff: unknown verdict %d: %w", s.verdict, ErrInternal)
}

func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
