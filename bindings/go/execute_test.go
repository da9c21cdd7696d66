package holdoff_test

// The retry helpers (Policy.Do, Policy.DoHTTP, Breaker.Do) beyond the conformance cases: their
// options, hooks, panics, contexts and the Go surface of their errors. Time moves only on the
// manual clock.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

// helperPolicy is a policy on clock whose waits advance it; edit adjusts the configuration.
func helperPolicy(t *testing.T, clock *holdoff.ManualClock, edit func(*holdoff.PolicyConfig), opts ...holdoff.Option) *holdoff.Policy {
	t.Helper()
	cfg := holdoff.DefaultPolicyConfig()
	if edit != nil {
		edit(&cfg)
	}
	var slept []time.Duration
	return must(holdoff.NewPolicy(cfg, append([]holdoff.Option{holdoff.WithClock(clock), advancing(clock, &slept)}, opts...)...))
}

// catch runs f and returns what it panicked with.
func catch(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// response is a scripted HTTP response whose body records its Close.
func response(status int, body string, header ...string) (*http.Response, *trackedBody) {
	b := &trackedBody{Reader: strings.NewReader(body)}
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: h, Body: b}, b
}

func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

// Limits are checked by the core, at construction and per call; the policy's defaults apply
// unless a call overrides them; an attempt's limit runs on the policy's manual clock and ends
// its context with context.DeadlineExceeded, the attempt counting as a timeout.
func TestTimeLimits(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	noRetry := func(c *holdoff.PolicyConfig) { c.Budget.MaxRetries = 0 }
	bad := []struct {
		opt   holdoff.Option
		field string
	}{
		{holdoff.WithAttemptTimeout(0), "execute.attempt_timeout"},
		{holdoff.WithAttemptTimeout(-time.Second), "execute.attempt_timeout"},
		{holdoff.WithTotalTimeout(0), "execute.total_timeout"},
		{holdoff.WithTotalTimeout(-1), "execute.total_timeout"},
	}
	for _, b := range bad {
		_, err := holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock), b.opt)
		errorOf(t, "NewPolicy", err, holdoff.ErrInvalidConfig, b.field)
	}
	p := helperPolicy(t, clock, noRetry, holdoff.WithAttemptTimeout(time.Second))
	defer p.Close()
	unreached := func(context.Context) error { t.Error("fn called"); return nil }
	for _, b := range bad {
		errorOf(t, "Do", p.Do(context.Background(), unreached, b.opt), holdoff.ErrInvalidConfig, b.field)
	}
	errorOf(t, "Do with a constructor's option", p.Do(context.Background(), unreached, holdoff.WithClock(clock)),
		holdoff.ErrInvalidConfig, "options")
	if holdoff.DefaultTotalTimeout != time.Minute {
		t.Fatalf("default total timeout %v", holdoff.DefaultTotalTimeout)
	}

	// hangs is an attempt that sees its context alive for alive, then ended by its limit.
	var outcomes []holdoff.OutcomeKind
	onAttempt := holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { outcomes = append(outcomes, a.Outcome.Kind) })
	hangs := func(alive time.Duration) func(context.Context) error {
		return func(ctx context.Context) error {
			clock.Advance(alive - time.Millisecond)
			if ctx.Err() != nil {
				t.Errorf("the attempt ended %v early", time.Millisecond)
			}
			clock.Advance(time.Millisecond)
			if ctx.Err() != context.DeadlineExceeded || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				t.Errorf("after %v: %v (cause %v)", alive, ctx.Err(), context.Cause(ctx))
			}
			return ctx.Err()
		}
	}
	err := p.Do(context.Background(), hangs(time.Second), onAttempt) // the policy's 1 s
	var gu *holdoff.GiveUpError
	if !errors.As(err, &gu) || gu.Reason != holdoff.AttemptsExhausted || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a timed-out attempt: %v", err)
	}
	err = p.Do(context.Background(), hangs(2*time.Second), onAttempt, holdoff.WithAttemptTimeout(2*time.Second))
	if !errors.As(err, &gu) {
		t.Fatalf("2 s: %v", err)
	}
	if fmt.Sprint(outcomes) != "[timeout timeout]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	// No limit at all.
	err = p.Do(context.Background(), func(ctx context.Context) error {
		clock.Advance(1000 * time.Hour)
		return ctx.Err()
	}, holdoff.WithAttemptTimeout(holdoff.NoLimit), holdoff.WithTotalTimeout(holdoff.NoLimit))
	if err != nil {
		t.Fatalf("no limit: %v", err)
	}
	// Without an attempt timeout, the default total timeout bounds the attempt.
	plain := helperPolicy(t, clock, noRetry)
	defer plain.Close()
	if err := plain.Do(context.Background(), hangs(time.Minute)); !errors.As(err, &gu) || gu.Reason != holdoff.AttemptsExhausted {
		t.Fatalf("the default total timeout: %v", err)
	}
	// The configuration's execute part, as options.
	cfg := must(holdoff.ParseConfig([]byte(`{"execute": {"attempt_timeout_ms": 250, "total_timeout_ms": null}}`)))
	defer cfg.Close()
	if cfg.Parts() != holdoff.PartExecute {
		t.Fatalf("parts %v", cfg.Parts())
	}
	if err := plain.Do(context.Background(), hangs(250*time.Millisecond), must(cfg.ExecuteOptions())...); !errors.As(err, &gu) ||
		gu.Reason != holdoff.AttemptsExhausted {
		t.Fatalf("the configuration's 250 ms: %v", err)
	}
}

// The hooks see every attempt (after it) and every wait (before it), in order; a call's hook
// replaces the policy's.
func TestHooks(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	var log []string
	p := helperPolicy(t, clock, nil, holdoff.WithOnAttempt(func(holdoff.AttemptInfo) { log = append(log, "policy's hook") }))
	defer p.Close()
	n := 0
	transport, limited := refused(), errors.New("429")
	err := p.Do(context.Background(), func(context.Context) error {
		n++
		switch n {
		case 1:
			return transport
		case 2:
			return holdoff.AsRetryLater(2*time.Second, limited)
		}
		return nil
	}, holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) {
		log = append(log, fmt.Sprintf("attempt %d at %v probe=%v %s/%v err=%v", a.Number, clock.Now(), a.Probe,
			a.Outcome.Kind, a.Outcome.Delay, a.Err))
	}), holdoff.WithOnRetry(func(r holdoff.RetryInfo) {
		log = append(log, fmt.Sprintf("wait %d %v %s capped=%v server=%v/%v err=%v", r.Attempts, r.Delay, r.Source,
			r.Capped, r.ServerDelay, r.HasServerDelay, r.Err))
	}))
	if err != nil {
		t.Fatal(err)
	}
	// The retry-later opens the breaker for 2 s: the third attempt is its probe.
	want := []string{
		"attempt 1 at 0s probe=false failure/0s err=dial tcp: connect: connection refused",
		"wait 1 500ms backoff capped=false server=0s/false err=dial tcp: connect: connection refused",
		"attempt 2 at 500ms probe=false retry_later/2s err=429",
		"wait 2 2s retry_after capped=false server=2s/true err=429",
		"attempt 3 at 2.5s probe=true success/0s err=<nil>",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hooks saw\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}

// A panic in fn (or in the classifier, or in the Close of a body DoHTTP discards) is a
// programming error: the attempt is recorded as cancelled, so a probe frees its slot at once and nothing counts; OnAttempt sees it; the
// same panic goes on; nothing is left alive. runtime.Goexit in fn (t.FailNow) does the same.
func TestPanicsFreeTheProbeAndGoOn(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) {
		c.Breaker.Trip = holdoff.ConsecutiveFailures(1)
		c.Breaker.OpenInterval.Initial, c.Breaker.OpenInterval.Multiplier = 10*time.Second, 1
		c.Breaker.ProbeTimeout = time.Hour
	})
	defer p.Close()
	b := p.Breaker()
	if _, err := b.Record(must(b.Allow()), holdoff.Failure); err != nil {
		t.Fatal(err)
	}
	settle() // the finalizers of what earlier tests dropped
	live := holdoff.LiveHandles()
	boom := &struct{ msg string }{"boom"}
	var seen []holdoff.AttemptInfo
	onAttempt := holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { seen = append(seen, a) })
	for _, c := range []struct {
		name string
		call func()
	}{
		{"Do", func() { p.Do(context.Background(), func(context.Context) error { panic(boom) }, onAttempt) }},
		{"DoHTTP", func() {
			p.DoHTTP(context.Background(), func(context.Context) (*http.Response, error) { panic(boom) }, onAttempt)
		}},
		{"the classifier", func() {
			p.Do(context.Background(), func(context.Context) error { return refused() }, onAttempt,
				holdoff.WithClassifier(func(error) (holdoff.Outcome, bool) { panic(boom) }))
		}},
		{"a body's Close", func() {
			p.DoHTTP(context.Background(), func(context.Context) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: panickyBody{boom}}, refused()
			}, onAttempt)
		}},
		{"Breaker.Do", func() { b.Do(context.Background(), func(context.Context) error { panic(boom) }) }},
		{"runtime.Goexit", func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.Do(context.Background(), func(context.Context) error { runtime.Goexit(); return nil }, onAttempt)
			}()
			<-done
			panic(boom)
		}},
	} {
		clock.Advance(10 * time.Second) // the next probe is due
		seen = nil
		if got := catch(c.call); got != boom {
			t.Errorf("%s: panicked with %v, want the same panic", c.name, got)
		}
		// A failure would have re-opened the breaker: it stays half-open, the window spent.
		s := b.Snapshot()
		if s.State != holdoff.HalfOpen || s.ProbesInFlight != 0 || s.Opens != 1 || s.Recoveries != 0 || s.ProbeReady {
			t.Errorf("%s: the probe was not freed, or counted: %+v", c.name, s)
		}
		if c.name != "Breaker.Do" && (len(seen) != 1 || !seen[0].Probe || seen[0].Outcome != holdoff.Cancelled) {
			t.Errorf("%s: OnAttempt saw %+v", c.name, seen)
		}
		if n := holdoff.LiveHandles(); n != live {
			t.Errorf("%s: %d handles alive, want %d", c.name, n, live)
		}
	}
}

// panickyBody panics when closed.
type panickyBody struct{ v any }

func (panickyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b panickyBody) Close() error           { panic(b.v) }

// AsRetryLater with a negative delay is the caller's error: returned as such (with fn's
// error), the attempt counting as nothing and a probe freed.
func TestNegativeRetryLaterIsTheCallersError(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) { c.Breaker.Trip = holdoff.ConsecutiveFailures(1) })
	defer p.Close()
	b := p.Breaker()
	if _, err := b.Record(must(b.Allow()), holdoff.Failure); err != nil {
		t.Fatal(err)
	}
	limited := errors.New("429")
	attempts := 0
	for _, do := range []func() error{
		func() error {
			return p.Do(context.Background(), func(context.Context) error {
				attempts++
				return holdoff.AsRetryLater(-time.Second, limited)
			})
		},
		func() error {
			return b.Do(context.Background(), func(context.Context) error {
				attempts++
				return holdoff.AsRetryLater(-time.Second, limited)
			})
		},
	} {
		clock.Advance(30 * time.Second)
		attempts = 0
		err := do()
		errorOf(t, "negative delay", err, holdoff.ErrInvalidInput, "outcome.delay")
		if !errors.Is(err, limited) || attempts != 1 {
			t.Errorf("%v after %d attempts", err, attempts)
		}
		if s := b.Snapshot(); s.State != holdoff.HalfOpen || s.ProbesInFlight != 0 || s.Opens != 1 || s.StaleAnswers != 0 {
			t.Errorf("the probe was not freed, or counted: %+v", s)
		}
	}
}

// What the caller gets, in Go: errors.Is/As/Unwrap of the upstream-unavailable errors, the
// responses DoHTTP returns or attaches (and closes), and the misuse of DoHTTP.
func TestHelperSurface(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) {
		c.Breaker.Trip = holdoff.ConsecutiveFailures(100)
		c.Budget.MaxRetries = 2
	})
	defer p.Close()

	// A final 404 after two 503s: (resp, nil); the 503s' bodies closed; the 404's attempt
	// context lives until its body is closed.
	var ctxs []context.Context
	var bodies []*trackedBody
	script := func(statuses ...int) func(ctx context.Context) (*http.Response, error) {
		ctxs, bodies = nil, nil
		return func(ctx context.Context) (*http.Response, error) {
			resp, body := response(statuses[len(ctxs)], fmt.Sprintf("attempt %d", len(ctxs)+1))
			ctxs, bodies = append(ctxs, ctx), append(bodies, body)
			return resp, nil
		}
	}
	resp, err := p.DoHTTP(context.Background(), script(503, 503, 404))
	if err != nil || resp.StatusCode != 404 || !bodies[0].closed || !bodies[1].closed || bodies[2].closed {
		t.Fatalf("final 404: %v %v", resp, err)
	}
	if ctxs[2].Err() != nil || ctxs[0].Err() != context.Canceled {
		t.Fatalf("the 404's context ended (%v), or the 503's did not (%v)", ctxs[2].Err(), ctxs[0].Err())
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != "attempt 3" {
		t.Fatalf("body %q", got)
	}
	resp.Body.Close()
	if ctxs[2].Err() != context.Canceled || !bodies[2].closed {
		t.Fatalf("closing the body: context %v, body closed %v", ctxs[2].Err(), bodies[2].closed)
	}

	// 500s until the retries run out: a give-up carrying the last response, open.
	resp, err = p.DoHTTP(context.Background(), script(500, 500, 500))
	var gu *holdoff.GiveUpError
	if resp != nil || !errors.As(err, &gu) || gu.Reason != holdoff.AttemptsExhausted || gu.Attempts != 3 ||
		gu.Err != nil || errors.Unwrap(err) != nil || !errors.Is(err, holdoff.ErrUpstreamUnavailable) ||
		errors.Is(err, holdoff.ErrBreakerOpen) || !strings.HasSuffix(err.Error(), ": HTTP 500 Internal Server Error") {
		t.Fatalf("500s: %v %v", resp, err)
	}
	if gu.Response == nil || gu.Response.StatusCode != 500 || bodies[2].closed || !bodies[1].closed {
		t.Fatalf("the attached response: %+v", gu.Response)
	}
	if got, _ := io.ReadAll(gu.Response.Body); string(got) != "attempt 3" {
		t.Fatalf("attached body %q", got)
	}
	gu.Response.Body.Close()

	// Errors until the retries run out: the give-up unwraps to the last one.
	var errs []error
	err = p.Do(context.Background(), func(context.Context) error { errs = append(errs, refused()); return errs[len(errs)-1] })
	if !errors.As(err, &gu) || len(errs) != 3 || gu.Err != errs[2] || errors.Unwrap(err) != errs[2] ||
		!errors.Is(err, syscall.ECONNREFUSED) || gu.Response != nil {
		t.Fatalf("transport errors: %v", err)
	}

	// A client's error wrapping a timeout is a timeout; the same error through DoHTTP.
	timeout := &url.Error{Op: "Get", URL: "http://upstream.invalid/", Err: os.ErrDeadlineExceeded}
	var kinds []holdoff.OutcomeKind
	_, err = p.DoHTTP(context.Background(), func(context.Context) (*http.Response, error) { return nil, timeout },
		holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { kinds = append(kinds, a.Outcome.Kind) }))
	if !errors.As(err, &gu) || gu.Err != timeout || fmt.Sprint(kinds) != "[timeout timeout timeout]" {
		t.Fatalf("client timeouts: %v %v", err, kinds)
	}

	// A value that is not a status, and neither a response nor an error: invalid input,
	// counting as nothing.
	failures := p.Breaker().Snapshot().Failures
	r, body := response(1000, "")
	_, err = p.DoHTTP(context.Background(), func(context.Context) (*http.Response, error) { return r, nil })
	errorOf(t, "status 1000", err, holdoff.ErrInvalidInput, "status")
	if !body.closed {
		t.Fatal("the body of a response that is not one was left open")
	}
	_, err = p.DoHTTP(context.Background(), func(context.Context) (*http.Response, error) { return nil, nil })
	errorOf(t, "nothing returned", err, holdoff.ErrInvalidInput, "response")
	if s := p.Breaker().Snapshot(); s.Failures != failures {
		t.Fatalf("invalid input counted: %+v", s)
	}

	// A retry the breaker keeps waiting for past the budget: refused, the last error attached.
	tight := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) {
		c.Breaker.Trip = holdoff.ConsecutiveFailures(1)
		c.Breaker.OpenInterval.Initial, c.Breaker.OpenInterval.Multiplier = 10*time.Second, 1
		c.Budget.MaxBackoffDuration = 5 * time.Second
	})
	defer tight.Close()
	last := refused()
	err = tight.Do(context.Background(), func(context.Context) error { return last })
	var open *holdoff.BreakerOpenError
	if !errors.As(err, &open) || open.Attempts != 1 || open.Err != last || errors.Unwrap(err) != last ||
		open.Reason != holdoff.BreakerOpenReason || open.RetryAfter != 10*time.Second || !open.HasRetryAfter ||
		open.State != holdoff.Open || !errors.Is(err, holdoff.ErrBreakerOpen) || !errors.Is(err, holdoff.ErrUpstreamUnavailable) {
		t.Fatalf("refused retry: %#v", err)
	}
	// A first attempt refused: nothing attached.
	err = tight.Do(context.Background(), func(context.Context) error { t.Error("called"); return nil })
	if !errors.As(err, &open) || open.Attempts != 0 || open.Err != nil || open.RetryAfter != 10*time.Second {
		t.Fatalf("refused call: %v", err)
	}
}

// Each attempt runs with its own context: a child of the caller's (its values, its
// cancellation), new for every attempt, ended when the attempt is over.
func TestEachAttemptHasItsOwnContext(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, nil)
	defer p.Close()
	type key struct{}
	caller, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "caller's"))
	defer cancel()
	var ctxs []context.Context
	err := p.Do(caller, func(ctx context.Context) error {
		for i, earlier := range ctxs {
			if earlier == ctx || earlier.Err() != context.Canceled {
				t.Errorf("attempt %d's context is reused, or alive: %v", i+1, earlier.Err())
			}
		}
		ctxs = append(ctxs, ctx)
		if ctx == caller || ctx.Value(key{}) != "caller's" || ctx.Err() != nil {
			t.Errorf("attempt %d: not a live child of the caller's context", len(ctxs))
		}
		if len(ctxs) < 3 {
			return refused()
		}
		cancel() // the caller's cancellation reaches the attempt
		<-ctx.Done()
		return fmt.Errorf("attempt 3: %w", ctx.Err())
	})
	if err != context.Canceled || len(ctxs) != 3 || ctxs[2].Err() != context.Canceled {
		t.Fatalf("%v after %d attempts", err, len(ctxs))
	}
}

// deadlineContext is a caller's context whose deadline the test makes pass: the wall clock
// never does.
type deadlineContext struct {
	context.Context
	in   time.Duration // the deadline is this far from now, whenever asked
	done chan struct{}
}

func (c *deadlineContext) Deadline() (time.Time, bool) { return time.Now().Add(c.in), true }
func (c *deadlineContext) Done() <-chan struct{}       { return c.done }
func (c *deadlineContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// The caller's deadline passing during an attempt is a timeout (a failure the breaker counts),
// never a cancellation; the deadline shortens the total timeout, and so the attempt's limit.
func TestCallersDeadlineIsATimeout(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) { c.Budget.MaxRetries = 0 })
	defer p.Close()
	caller := &deadlineContext{Context: context.Background(), in: time.Hour, done: make(chan struct{})}
	var outcome holdoff.Outcome
	err := p.Do(caller, func(ctx context.Context) error {
		close(caller.done)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Error("the caller's deadline did not reach the attempt")
		}
		return ctx.Err()
	}, holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { outcome = a.Outcome }))
	var gu *holdoff.GiveUpError
	if !errors.As(err, &gu) || outcome != holdoff.Timeout || !errors.Is(err, context.DeadlineExceeded) ||
		p.Breaker().Snapshot().Failures != 1 {
		t.Fatalf("%v, attempt %v", err, outcome.Kind)
	}

	// The caller's deadline (10 s away) shortens the total timeout: a server's 30 s is not
	// waited into it.
	var waits []time.Duration
	caller = &deadlineContext{Context: context.Background(), in: 10 * time.Second, done: make(chan struct{})}
	err = p.Do(caller, func(context.Context) error { return holdoff.AsRetryLater(30*time.Second, errors.New("429")) },
		holdoff.WithOnRetry(func(r holdoff.RetryInfo) { waits = append(waits, r.Delay) }))
	if !errors.As(err, &gu) || gu.Reason != holdoff.TotalTimeout || gu.RetryAfter != 30*time.Second || len(waits) != 0 {
		t.Fatalf("a Retry-After past the caller's deadline: %v (waited %v)", err, waits)
	}

	// On the system clock an attempt's context carries its limit as its deadline: the
	// earliest of the attempt timeout, the total timeout and the caller's deadline.
	sys := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig()))
	defer sys.Close()
	for _, c := range []struct {
		caller time.Duration
		opts   []holdoff.Option
		want   time.Duration
	}{
		{time.Hour, nil, time.Minute},
		{time.Hour, []holdoff.Option{holdoff.WithTotalTimeout(holdoff.NoLimit)}, time.Hour},
		{10 * time.Second, nil, 10 * time.Second},
		{time.Hour, []holdoff.Option{holdoff.WithAttemptTimeout(3 * time.Second)}, 3 * time.Second},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), c.caller)
		start := time.Now()
		err := sys.Do(ctx, func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if left := d.Sub(start); !ok || left > c.want+time.Second || left < c.want-time.Second {
				t.Errorf("caller %v %d options: the attempt's deadline is %v away, want %v", c.caller, len(c.opts),
					left, c.want)
			}
			return nil
		}, c.opts...)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Go's default classification (conformance/README.md's table).
func TestOutcomeOf(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithDeadline(live, time.Unix(0, 0))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want holdoff.Outcome
	}{
		{live, nil, holdoff.Success},
		{live, refused(), holdoff.Failure},
		{live, &url.Error{Op: "Get", URL: "u", Err: refused()}, holdoff.Failure},
		{live, io.ErrUnexpectedEOF, holdoff.Failure},
		{live, errors.New("anything else"), holdoff.Failure},
		{live, context.DeadlineExceeded, holdoff.Timeout},
		{live, &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, holdoff.Timeout},
		{live, context.Canceled, holdoff.Failure}, // not the caller's
		{cancelled, context.Canceled, holdoff.Cancelled},
		{cancelled, refused(), holdoff.Cancelled},
		{expired, context.DeadlineExceeded, holdoff.Timeout},
		{live, holdoff.AsAnswer(errors.New("404")), holdoff.Answer},
		{cancelled, holdoff.AsRetryLater(time.Second, nil), holdoff.RetryLaterOutcome(time.Second)},
	} {
		if got := holdoff.OutcomeOf(c.ctx, c.err); got != c.want {
			t.Errorf("OutcomeOf(%v, %v) = %v, want %v", c.ctx.Err(), c.err, got.Kind, c.want.Kind)
		}
	}
}

// The helper failing to report an attempt (here a classifier's outcome of an unknown kind) is a
// programming error: the attempt is recorded as cancelled, also past its time limit (never by
// freeing the execution, which would count a timeout), OnAttempt sees it, and the call ends
// with that error, unretried. Breaker.Do frees its permit the same way.
func TestHelperFailuresAreBugs(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) {
		c.Breaker.Trip = holdoff.ConsecutiveFailures(1)
		c.Budget.MaxRetries = 1
	}, holdoff.WithAttemptTimeout(100*time.Millisecond))
	defer p.Close()
	b := p.Breaker()
	garbage := holdoff.WithClassifier(func(error) (holdoff.Outcome, bool) { return holdoff.Outcome{Kind: 99}, true })
	untouched := func(what string) {
		t.Helper()
		if s := b.Snapshot(); s.State != holdoff.Closed || s.Failures != 0 || s.ProbesInFlight != 0 {
			t.Errorf("%s: the breaker moved: %+v", what, s)
		}
		b.Reset() // the next case starts afresh
	}
	settle() // the finalizers of what earlier tests dropped
	live := holdoff.LiveHandles()
	down := refused()
	for _, c := range []struct {
		name  string
		fn    func(context.Context) error
		cause error
	}{
		{"past the limit", func(ctx context.Context) error {
			clock.Advance(150 * time.Millisecond)
			if ctx.Err() != context.DeadlineExceeded {
				t.Errorf("the attempt's context was not ended by its limit: %v", ctx.Err())
			}
			return nil // the classifier is asked about a nil: its limit does not decide
		}, nil},
		{"an error", func(context.Context) error { return down }, down},
	} {
		var seen []holdoff.AttemptInfo
		attempts := 0
		err := p.Do(context.Background(), func(ctx context.Context) error { attempts++; return c.fn(ctx) }, garbage,
			holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { seen = append(seen, a) }))
		if attempts != 1 || !errors.Is(err, holdoff.ErrInvalidInput) || (c.cause != nil && !errors.Is(err, c.cause)) {
			t.Errorf("%s: %v after %d attempts", c.name, err, attempts)
		}
		if len(seen) != 1 || seen[0].Outcome != holdoff.Cancelled || seen[0].Err != c.cause {
			t.Errorf("%s: OnAttempt saw %+v", c.name, seen)
		}
		untouched(c.name)
		if e := (*holdoff.Error)(nil); !errors.As(err, &e) || e.Field != "outcome.kind" {
			t.Errorf("%s: %v does not name outcome.kind", c.name, err)
		}
	}

	// Breaker.Do: fn's own outcome of an unknown kind frees the probe it held.
	if _, err := b.Record(must(b.Allow()), holdoff.Failure); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // the probe is due
	err := b.Do(context.Background(), func(context.Context) error {
		return &holdoff.OutcomeError{Outcome: holdoff.Outcome{Kind: 99}, Err: down}
	})
	if !errors.Is(err, holdoff.ErrInvalidInput) || !errors.Is(err, down) {
		t.Errorf("Breaker.Do: %v", err)
	}
	if s := b.Snapshot(); s.State != holdoff.HalfOpen || s.ProbesInFlight != 0 || s.Opens != 1 {
		t.Errorf("Breaker.Do: the probe was not freed, or counted: %+v", s)
	}
	if n := holdoff.LiveHandles(); n != live {
		t.Errorf("%d handles alive, want %d", n, live)
	}
}

// The caller's cancellation ends the call even when it comes after the attempt's own limit
// cut it: never retried nor turned into a give-up; the breaker counts that attempt as the
// timeout it was.
func TestCallersCancellationPastTheLimitEndsTheCall(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := helperPolicy(t, clock, func(c *holdoff.PolicyConfig) { c.Budget.MaxRetries = 0 },
		holdoff.WithAttemptTimeout(100*time.Millisecond))
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []holdoff.AttemptInfo
	attempts := 0
	err := p.Do(ctx, func(actx context.Context) error {
		attempts++
		clock.Advance(150 * time.Millisecond) // the attempt's limit passes
		cancel()                              // then the caller cancels
		return actx.Err()
	}, holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { seen = append(seen, a) }))
	if !errors.Is(err, context.Canceled) || errors.Is(err, holdoff.ErrUpstreamUnavailable) || attempts != 1 {
		t.Errorf("got %v after %d attempts, want context.Canceled", err, attempts)
	}
	if len(seen) != 1 || seen[0].Outcome != holdoff.Timeout {
		t.Errorf("OnAttempt saw %+v, want the attempt recorded as a timeout", seen)
	}
	if s := p.Breaker().Snapshot(); s.Failures != 1 {
		t.Errorf("the breaker did not count the timeout: %+v", s)
	}
}
