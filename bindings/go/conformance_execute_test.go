package holdoff_test

// The `execute` op of the conformance runner (conformance/README.md, "Execute: the retry
// helpers"): one logical call through Policy.Do (the plain flavour) or Policy.DoHTTP (the HTTP
// flavour, answered by an http.Client whose RoundTripper plays the script: no network). The
// sleeper advances the manual clock (or cancels the call at cancel_in_wait); attempt time
// limits run on the same manual clock; the hooks record what a user sees.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	holdoff "holdoff.dev/go"
)

// The Go helper flavours.
const (
	flavourDo     = "Do"
	flavourDoHTTP = "DoHTTP"
)

// needs is the flavour an execute step's script needs ("" for either).
func needs(step obj) string {
	script, _ := step["script"].([]any)
	for _, it := range script {
		item, _ := it.(map[string]any)
		if _, ok := item["returns"]; ok {
			return flavourDo
		}
		if _, ok := item["response"]; ok {
			return flavourDoHTTP
		}
	}
	return ""
}

// flavoursOf is the runs of a case: [""] without an execute step; otherwise one per flavour
// its scripts allow together, both when they need one each (each step then goes through the
// flavour its script needs, or its run's).
func flavoursOf(cs obj) []string {
	steps, _ := cs["steps"].([]any)
	found, needed := false, map[string]bool{}
	for _, s := range steps {
		step, _ := s.(map[string]any)
		if str(step, "op", "") != "execute" {
			continue
		}
		found = true
		if n := needs(step); n != "" {
			needed[n] = true
		}
	}
	switch {
	case !found:
		return []string{""}
	case len(needed) == 1:
		for n := range needed {
			return []string{n}
		}
	}
	return []string{flavourDo, flavourDoHTTP}
}

// answerError is the runner's own error type, which its classifier calls an answer.
type answerError struct{ attempt int }

func (e *answerError) Error() string { return fmt.Sprintf("attempt %d: answer", e.attempt) }

// bug is the panic value of a programming error.
type bug struct{ attempt int }

// runnerFailure aborts a call from inside an attempt: the script and the helper disagree.
type runnerFailure struct{ err error }

// trackedBody is a scripted response's body, which records its Close.
type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

var knownScriptKeys = map[string]bool{"takes_ms": true, "returns": true, "response": true, "raises": true,
	"hits_deadline": true, "cancelled": true}

// scriptedCall is one execute step in progress.
type scriptedCall struct {
	c            *ctx
	step         obj
	script       []obj
	ctx          context.Context
	cancel       context.CancelFunc
	cancelInWait int
	client       *http.Client
	current      int // the attempt running (1 for the first), or the last one
	attempts     []obj
	waits        []obj
	errs         map[int]error
	resps        map[int]*http.Response
	bodies       map[int]*trackedBody
	returned     map[int]bool // the attempt's fn returned no error
}

func (c *ctx) execute(step obj, runFlavour string) error {
	if c.policy == nil {
		return fmt.Errorf("the case has no policy")
	}
	raw, ok := step["script"].([]any)
	if !ok {
		return fmt.Errorf("execute needs a script")
	}
	s := &scriptedCall{c: c, step: step, errs: map[int]error{}, resps: map[int]*http.Response{},
		bodies: map[int]*trackedBody{}, returned: map[int]bool{}, attempts: []obj{}, waits: []obj{}}
	for _, it := range raw {
		item, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("a script item must be an object")
		}
		for k := range item {
			if !knownScriptKeys[k] {
				return fmt.Errorf("unknown script key %q", k)
			}
		}
		s.script = append(s.script, item)
	}
	if n, ok := u64(step["cancel_in_wait"]); ok {
		s.cancelInWait = int(n)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer s.cancel()
	s.client = &http.Client{Transport: roundTripper(s.roundTrip),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	flavour := needs(step)
	if flavour == "" {
		flavour = runFlavour
	}
	limits, err := c.config.ExecuteOptions()
	if err != nil {
		return err
	}
	opts := append(limits, holdoff.WithSleeper(s.sleep), holdoff.WithOnRetry(s.onRetry),
		holdoff.WithOnAttempt(s.onAttempt), holdoff.WithClassifier(s.classify))
	resp, err, panicked := s.run(flavour, opts)
	if f, ok := panicked.(runnerFailure); ok {
		return f.err
	}
	result, err := s.result(flavour, resp, err, panicked)
	if err != nil {
		return err
	}
	if err := s.bodiesClosed(); err != nil {
		return err
	}
	return checkExecute(step["expect"], obj{"attempts": s.attempts, "waits": s.waits, "result": result})
}

// run makes the call; a panic that comes out of it is returned.
func (s *scriptedCall) run(flavour string, opts []holdoff.Option) (resp *http.Response, err error, panicked any) {
	defer func() { panicked = recover() }()
	if flavour == flavourDo {
		err = s.c.policy.Do(s.ctx, s.plain, opts...)
	} else {
		resp, err = s.c.policy.DoHTTP(s.ctx, s.http, opts...)
	}
	return resp, err, nil
}

// begin starts attempt n's script item: it records the attempt's start and moves the clock by
// takes_ms (a hanging attempt moves it to its limit: the attempt's timer then fires).
func (s *scriptedCall) begin() obj {
	s.current++
	if s.current > len(s.script) {
		panic(runnerFailure{fmt.Errorf("attempt %d is not in the script", s.current)})
	}
	s.attempts = append(s.attempts, obj{"at": float64(s.c.clock.Now() / time.Millisecond)})
	item := s.script[s.current-1]
	takes, _ := u64(item["takes_ms"])
	if err := s.c.clock.Advance(time.Duration(takes) * time.Millisecond); err != nil {
		panic(runnerFailure{err})
	}
	return item
}

// fails is what a scripted attempt that does not respond or return does, in ctx (the
// attempt's own context): its error, or a panic.
func (s *scriptedCall) fails(ctx context.Context, item obj) error {
	n := s.current
	switch {
	case item["hits_deadline"] == true:
		select {
		case <-ctx.Done():
			return fmt.Errorf("attempt %d hung: %w", n, ctx.Err())
		case <-time.After(5 * time.Second): // a watchdog: the manual clock did not end it
			panic(runnerFailure{fmt.Errorf("attempt %d hangs but its time limit never passed", n)})
		}
	case item["cancelled"] == true:
		s.cancel()
		return fmt.Errorf("attempt %d: %w", n, ctx.Err())
	}
	switch r := item["raises"].(type) {
	case string:
		switch r {
		case "transport":
			return &net.OpError{Op: "dial", Net: "tcp",
				Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
		case "timeout":
			return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		case "answer":
			return &answerError{n}
		case "bug":
			panic(&bug{n})
		}
	case map[string]any:
		if ms, ok := u64(r["retry_later_ms"]); ok {
			return holdoff.AsRetryLater(time.Duration(ms)*time.Millisecond, fmt.Errorf("attempt %d: retry later", n))
		}
	}
	panic(runnerFailure{fmt.Errorf("attempt %d: unknown script item %v", n, item)})
}

// plain is the operation given to Do.
func (s *scriptedCall) plain(ctx context.Context) error {
	item := s.begin()
	n := s.current
	if _, ok := item["response"]; ok {
		panic(runnerFailure{fmt.Errorf("attempt %d responds, but Do has no responses", n)})
	}
	var err error
	if _, ok := item["returns"]; !ok {
		err = s.fails(ctx, item)
	}
	s.errs[n], s.returned[n] = err, err == nil
	return err
}

// http is the operation given to DoHTTP: a GET through the scripted client.
func (s *scriptedCall) http(ctx context.Context) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.invalid/", nil)
	if err != nil {
		panic(runnerFailure{err})
	}
	if s.current < len(s.script) && s.script[s.current]["raises"] == "bug" {
		s.begin()
		panic(&bug{s.current}) // a programming error in the caller's code, not in the client
	}
	resp, err := s.client.Do(req)
	s.errs[s.current], s.resps[s.current] = err, resp
	return resp, err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// roundTrip answers one request as the script says.
func (s *scriptedCall) roundTrip(req *http.Request) (*http.Response, error) {
	item := s.begin()
	n := s.current
	if _, ok := item["returns"]; ok {
		panic(runnerFailure{fmt.Errorf("attempt %d returns a value, but DoHTTP has responses", n)})
	}
	r, ok := item["response"].(map[string]any)
	if !ok {
		return nil, s.fails(req.Context(), item)
	}
	status, ok := i64(r["status"])
	if !ok {
		panic(runnerFailure{fmt.Errorf("a response needs an integer status")})
	}
	hs, err := headersOf(r)
	if err != nil {
		panic(runnerFailure{err})
	}
	header := http.Header{}
	for _, h := range hs {
		header.Add(h.Name, h.Value)
	}
	body := &trackedBody{Reader: strings.NewReader(fmt.Sprintf("attempt %d", n))}
	s.bodies[n] = body
	return &http.Response{StatusCode: int(status), Status: fmt.Sprintf("%d %s", status, http.StatusText(int(status))),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Body: body, Request: req}, nil
}

// classify is the runner's classifier: a returned value means its script's outcome; the
// runner's answerError is an answer; anything else takes the default.
func (s *scriptedCall) classify(err error) (holdoff.Outcome, bool) {
	var a *answerError
	if errors.As(err, &a) {
		return holdoff.Answer, true
	}
	if err != nil || s.current == 0 {
		return holdoff.Outcome{}, false
	}
	if r, ok := s.script[s.current-1]["returns"]; ok && r != "success" {
		o, oerr := outcomeOf(r)
		if oerr != nil {
			panic(runnerFailure{oerr})
		}
		return o, true
	}
	return holdoff.Outcome{}, false
}

// sleep advances the manual clock by each wait, or cancels the call at wait cancel_in_wait.
func (s *scriptedCall) sleep(ctx context.Context, d time.Duration) error {
	if len(s.waits) == s.cancelInWait {
		s.cancel()
		return ctx.Err()
	}
	return s.c.clock.Advance(d)
}

func (s *scriptedCall) onRetry(w holdoff.RetryInfo) {
	s.waits = append(s.waits, obj{"delay_ms": msOf(w.Delay), "source": w.Source.String(), "capped": w.Capped,
		"server_delay_ms": optMs(w.ServerDelay, w.HasServerDelay)})
}

func (s *scriptedCall) onAttempt(a holdoff.AttemptInfo) {
	if a.Number != len(s.attempts) {
		panic(runnerFailure{fmt.Errorf("OnAttempt for attempt %d, but %d started", a.Number, len(s.attempts))})
	}
	s.attempts[a.Number-1]["probe"] = a.Probe
	s.attempts[a.Number-1]["outcome"] = a.Outcome.Kind.String()
}

// attemptOf is the attempt whose error or response is attached to a give-up or refusal.
func (s *scriptedCall) attemptOf(u *holdoff.Unavailable, flavour string) any {
	for n := range s.current + 1 {
		if u.Err != nil && s.errs[n] == u.Err || u.Response != nil && s.resps[n] == u.Response {
			return n
		}
	}
	// Do's fn returns no value: what a give-up keeps of a returned attempt is its nil error.
	if flavour == flavourDo && u.Err == nil && u.Attempts > 0 && s.returned[u.Attempts] {
		return u.Attempts
	}
	return nil
}

// result is what the caller got, as the contract's `result`.
func (s *scriptedCall) result(flavour string, resp *http.Response, err error, panicked any) (obj, error) {
	made := len(s.attempts)
	if panicked != nil {
		if b, ok := panicked.(*bug); ok && b.attempt == s.current {
			return obj{"raises": "original", "attempt": b.attempt}, nil
		}
		return nil, fmt.Errorf("unexpected panic %v", panicked)
	}
	if err == nil {
		if flavour == flavourDo {
			if resp != nil || made == 0 || !s.returned[made] {
				return nil, fmt.Errorf("Do returned nil after attempt %d, which did not return", made)
			}
			return obj{"returns": made}, nil
		}
		for n, r := range s.resps {
			if r == resp && r != nil {
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := fmt.Sprintf("attempt %d", n); string(got) != want {
					return nil, fmt.Errorf("the returned response's body reads %q, want %q", got, want)
				}
				return obj{"returns": n}, nil
			}
		}
		return nil, fmt.Errorf("DoHTTP returned a response no attempt gave: %v", resp)
	}
	if resp != nil {
		return nil, fmt.Errorf("DoHTTP returned a response with the error %v", err)
	}
	var open *holdoff.BreakerOpenError
	var gaveUp *holdoff.GiveUpError
	var u *holdoff.Unavailable
	r := obj{}
	switch {
	case errors.As(err, &open):
		u = &open.Unavailable
		if !errors.Is(err, holdoff.ErrBreakerOpen) || open.Reason != holdoff.BreakerOpenReason {
			return nil, fmt.Errorf("a refusal that is not ErrBreakerOpen: %v", err)
		}
		r["raises"] = "breaker_open"
	case errors.As(err, &gaveUp):
		u = &gaveUp.Unavailable
		r = obj{"raises": "give_up", "reason": u.Reason.String(), "server_delay_ms": optMs(u.ServerDelay, u.HasServerDelay),
			"capped": u.Capped}
	}
	if u != nil {
		if !errors.Is(err, holdoff.ErrUpstreamUnavailable) {
			return nil, fmt.Errorf("not an upstream-unavailable error: %v", err)
		}
		if errors.Unwrap(err) != u.Err {
			return nil, fmt.Errorf("%v unwraps to %v, not to its last error %v", err, errors.Unwrap(err), u.Err)
		}
		if u.Response != nil {
			u.Response.Body.Close()
		}
		r["attempts"] = u.Attempts
		r["retry_after_ms"] = optMs(u.RetryAfter, u.HasRetryAfter)
		r["cause"] = s.attemptOf(u, flavour)
		return r, nil
	}
	for n := 1; n <= s.current; n++ {
		if s.errs[n] != nil && err == s.errs[n] {
			return obj{"raises": "original", "attempt": n}, nil
		}
	}
	var e *holdoff.Error
	switch {
	case err == context.Canceled:
		return obj{"raises": "cancelled", "attempts": made}, nil
	case errors.As(err, &e) && errors.Is(err, holdoff.ErrInvalidInput) && e.Field == "status":
		return obj{"raises": "invalid_input", "attempts": made}, nil
	}
	return nil, fmt.Errorf("unexpected error %T: %v", err, err)
}

// bodiesClosed checks that every scripted response's body was closed: by DoHTTP when it moved
// past the response, by the runner for the one it got back.
func (s *scriptedCall) bodiesClosed() error {
	for n, b := range s.bodies {
		if !b.closed {
			return fmt.Errorf("the body of attempt %d's response was left open", n)
		}
	}
	return nil
}

// checkExecute compares an execute step's expectation: attempts and waits are exact lists
// (each item asserting the keys it lists), result asserts the keys it lists.
func checkExecute(expect any, got obj) error {
	if expect == nil {
		return nil
	}
	want, ok := expect.(map[string]any)
	if !ok {
		return fmt.Errorf("expect must be an object")
	}
	for k, w := range want {
		switch k {
		case "attempts", "waits":
			list, ok := w.([]any)
			if !ok {
				return fmt.Errorf("%s must be an array", k)
			}
			have := got[k].([]obj)
			if len(list) != len(have) {
				return fmt.Errorf("%s: expected %d, got %d: %v", k, len(list), len(have), have)
			}
			known := []string{"at", "probe", "outcome"}
			if k == "waits" {
				known = []string{"delay_ms", "source", "capped", "server_delay_ms"}
			}
			for i := range list {
				if err := check(list[i], have[i], known...); err != nil {
					return fmt.Errorf("%s[%d]: %w", k, i, err)
				}
			}
		case "result":
			if err := check(w, got["result"].(obj), "returns", "raises", "reason", "attempts", "attempt",
				"retry_after_ms", "server_delay_ms", "capped", "cause"); err != nil {
				return fmt.Errorf("result: %w", err)
			}
		default:
			return fmt.Errorf("unknown expect key %q", k)
		}
	}
	return nil
}
