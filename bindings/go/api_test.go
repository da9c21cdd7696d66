package holdoff_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// must2 is must for a function of two results.
func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func manualClock(t *testing.T) *holdoff.ManualClock {
	t.Helper()
	c, err := holdoff.NewManualClock(time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	var e *holdoff.Error
	if !errors.As(err, &e) {
		t.Fatalf("expected *holdoff.Error, got %T %v", err, err)
	}
	return e.Field
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cfg := holdoff.DefaultBreakerConfig()
	cfg.OpenInterval.Multiplier = math.NaN()
	_, err := holdoff.NewBreaker(cfg)
	if !errors.Is(err, holdoff.ErrInvalidConfig) || fieldOf(t, err) != "breaker.open_interval.multiplier" {
		t.Fatalf("NaN multiplier: %v", err)
	}
	cfg = holdoff.DefaultBreakerConfig()
	cfg.OpenInterval.Initial = -time.Second
	_, err = holdoff.NewBreaker(cfg)
	if !errors.Is(err, holdoff.ErrInvalidConfig) || fieldOf(t, err) != "breaker.open_interval.initial" {
		t.Fatalf("negative interval: %v", err)
	}
	cfg = holdoff.DefaultBreakerConfig()
	cfg.MaxRetryLater = 0
	_, err = holdoff.NewBreaker(cfg)
	if fieldOf(t, err) != "breaker.max_retry_later" {
		t.Fatalf("zero guard: %v", err)
	}
	_, err = holdoff.NewBreaker(holdoff.BreakerConfig{Trip: holdoff.FailureRate(1.5, 10, time.Minute, 0)})
	if fieldOf(t, err) != "breaker.trip.threshold" {
		t.Fatalf("rate > 1: %v", err)
	}
	b := holdoff.DefaultBudgetConfig()
	b.MaxRateLimitDuration = b.RetryAfterCap // incident 3: no room for two waits
	_, err = holdoff.NewRetryBudget(b)
	if fieldOf(t, err) != "budget.max_rate_limit_duration" {
		t.Fatalf("budget: %v", err)
	}
	_, err = holdoff.NewClassifier(holdoff.ClassifierConfig{FailureStatuses: []int{403, 700}})
	if fieldOf(t, err) != "classifier.failure_statuses" {
		t.Fatalf("classifier: %v", err)
	}
	_, err = holdoff.ParseConfig([]byte(`{"breaker": {"recoverys": 3}}`))
	if fieldOf(t, err) != "config" {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestBreakerOpenErrorsAndDefaults(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	defer b.Close()
	boom := errors.New("boom")
	for i := 0; i < 5; i++ {
		if err := b.Do(context.Background(), func(context.Context) error { return boom }); err != boom {
			t.Fatalf("Do returns fn's error, got %v", err)
		}
	}
	called := false
	err := b.Do(context.Background(), func(context.Context) error { called = true; return nil })
	var open *holdoff.BreakerOpenError
	if called || !errors.As(err, &open) || !errors.Is(err, holdoff.ErrBreakerOpen) ||
		!errors.Is(err, holdoff.ErrUpstreamUnavailable) {
		t.Fatalf("refused call: called=%v err=%v", called, err)
	}
	if open.RetryAfter != 30*time.Second || !open.HasRetryAfter || open.State != holdoff.Open {
		t.Fatalf("refusal: %+v", open)
	}
	clock.Advance(30 * time.Second)
	p := must(b.Allow())
	if !p.IsProbe() || p.Episode() != 1 {
		t.Fatalf("probe: %v %v", p.IsProbe(), p.Episode())
	}
	if _, err := b.Record(p, holdoff.Success); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Record(p, holdoff.Success); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
		t.Fatalf("second record: %v", err)
	}
	s := b.Snapshot()
	if s.State != holdoff.HalfOpen || s.Recoveries != 1 || s.Opens != 1 {
		t.Fatalf("snapshot: %+v", s)
	}
	ev := b.DrainEvents()
	if len(ev) != 2 || ev[0].Reason.String() != "tripped" || ev[1].To != holdoff.HalfOpen ||
		ev[0].OpenFor != 30*time.Second {
		t.Fatalf("events: %+v", ev)
	}
	if err := clock.Set(time.Second); !errors.Is(err, holdoff.ErrClockBackwards) {
		t.Fatalf("clock backwards: %v", err)
	}
}

func TestForeignPermitStaysUsable(t *testing.T) {
	a := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	defer a.Close()
	defer b.Close()
	p := must(a.Allow())
	if _, err := b.Record(p, holdoff.Success); !errors.Is(err, holdoff.ErrForeignPermit) {
		t.Fatalf("foreign: %v", err)
	}
	if e, err := a.Record(p, holdoff.Success); err != nil || e != holdoff.Counted {
		t.Fatalf("own breaker: %v %v", e, err)
	}
	if _, err := a.Record(must(a.Allow()), holdoff.RetryLaterOutcome(-time.Second)); !errors.Is(err, holdoff.ErrInvalidInput) {
		t.Fatalf("negative delay: %v", err)
	}
}

// advancing is a sleeper that moves a manual clock instead of waiting.
func advancing(clock *holdoff.ManualClock, slept *[]time.Duration) holdoff.Option {
	return holdoff.WithSleeper(func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		*slept = append(*slept, d)
		return clock.Advance(d)
	})
}

func TestPolicyDoRetriesWithBackoffAndRetryAfter(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	var slept []time.Duration
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock), advancing(clock, &slept)))
	defer p.Close()
	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempts++
		switch attempts {
		case 1:
			return errors.New("503")
		case 2:
			return holdoff.AsRetryLater(2*time.Second, errors.New("429"))
		}
		return nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("err=%v attempts=%d", err, attempts)
	}
	// 500 ms backoff after the failure; then the breaker, opened by the retry-later, waits
	// 2 s: the same wait the budget asks for.
	if fmt.Sprint(slept) != "[500ms 2s]" {
		t.Fatalf("slept %v", slept)
	}
	// Recovery needs 3 probe answers one interval apart: the breaker is half-open now, and a
	// first attempt does not wait for it.
	err = p.Do(context.Background(), func(context.Context) error { return nil })
	if !errors.Is(err, holdoff.ErrBreakerOpen) {
		t.Fatalf("half-open breaker: %v", err)
	}
	var open *holdoff.BreakerOpenError
	if !errors.As(err, &open) || open.State != holdoff.HalfOpen || open.RetryAfter != 2*time.Second {
		t.Fatalf("refusal: %+v", open)
	}
	p.Breaker().Reset()
	// An error classified as an answer is the caller's result: returned unchanged, not retried.
	notFound := holdoff.AsAnswer(errors.New("404"))
	attempts = 0
	err = p.Do(context.Background(), func(context.Context) error { attempts++; return notFound })
	if err != notFound || attempts != 1 || errors.Is(err, holdoff.ErrUpstreamUnavailable) {
		t.Fatalf("answer: %v after %d attempts", err, attempts)
	}
}

func TestPolicyDoHonoursCancellation(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	var slept []time.Duration
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock), advancing(clock, &slept)))
	defer p.Close()
	// The caller cancels during an attempt: the call ends with the caller's context.Canceled,
	// unretried, and the attempt counts for nothing.
	ctx, cancel := context.WithCancel(context.Background())
	err := p.Do(ctx, func(context.Context) error { cancel(); return errors.New("503") })
	if err != context.Canceled || len(slept) != 0 || p.Breaker().Snapshot().Failures != 0 {
		t.Fatalf("cancelled during the call: %v (slept %v)", err, slept)
	}
	// A context that has ended before the call: fn is not called.
	if err := p.Do(ctx, func(context.Context) error { t.Fatal("called"); return nil }); err != context.Canceled {
		t.Fatalf("cancelled before the call: %v", err)
	}
	// The real timer sleep returns as soon as the context ends.
	real := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig()))
	defer real.Close()
	ctx, cancel = context.WithCancel(context.Background())
	called := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- real.Do(ctx, func(context.Context) error {
			close(called)
			return holdoff.AsRetryLater(30*time.Second, errors.New("429"))
		})
	}()
	<-called
	cancel()
	if err = <-done; err != context.Canceled {
		t.Fatalf("cancelled during the wait: %v", err)
	}
}

func TestPolicyGivesUpWhenTheBreakerStaysOpen(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	var slept []time.Duration
	cfg := holdoff.DefaultPolicyConfig()
	cfg.Breaker.Trip = holdoff.ConsecutiveFailures(1)
	p := must(holdoff.NewPolicy(cfg, holdoff.WithClock(clock), advancing(clock, &slept)))
	defer p.Close()
	p.Breaker().ForceOpen()
	err := p.Do(context.Background(), func(context.Context) error { return nil })
	var open *holdoff.BreakerOpenError
	if !errors.Is(err, holdoff.ErrBreakerOpen) || !errors.As(err, &open) || open.HasRetryAfter {
		t.Fatalf("forced open: %v", err)
	}
}

func TestDoHTTPReadsRetryAfter(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	clock := manualClock(t)
	defer clock.Close()
	var slept []time.Duration
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock), advancing(clock, &slept)))
	defer p.Close()
	resp, err := p.DoHTTP(context.Background(), func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		return http.DefaultClient.Do(req)
	})
	if err != nil || resp.StatusCode != 200 || fmt.Sprint(slept) != "[7s]" {
		t.Fatalf("resp=%v err=%v slept=%v", resp, err, slept)
	}
	resp.Body.Close()
}

// errorOf asserts that err is an *holdoff.Error matching sentinel whose Field is field.
func errorOf(t *testing.T, what string, err error, sentinel error, field string) {
	t.Helper()
	var e *holdoff.Error
	if !errors.As(err, &e) || !errors.Is(err, sentinel) || e.Field != field {
		t.Fatalf("%s: want %v naming %q, got %T %v", what, sentinel, field, err, err)
	}
}

// Each Get hands out the breaker the group holds for the key now: two lookups of one key drive
// one breaker, however many wrappers they return.
func TestGroupGetSharesTheKeysBreaker(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1)
	g := must(holdoff.NewBreakerGroup(cfg, holdoff.WithClock(clock)))
	a1, a2, b := must(g.Get("a")), must(g.Get("a")), must(g.Get("b"))
	defer a1.Close()
	defer a2.Close()
	defer b.Close()
	if _, err := a1.Record(must(a1.Allow()), holdoff.Failure); err != nil {
		t.Fatal(err)
	}
	if s := a2.Snapshot(); s.State != holdoff.Open || s.Opens != 1 {
		t.Fatalf("a through its second lookup: %+v", s)
	}
	if s := b.Snapshot(); s.State != holdoff.Closed {
		t.Fatalf("b: %+v", s)
	}
	// A permit admitted through one lookup records through another: they are one breaker.
	clock.Advance(30 * time.Second)
	probe := must(a2.Allow())
	if e, err := a1.Record(probe, holdoff.Success); err != nil || e != holdoff.Counted {
		t.Fatalf("probe recorded through the other lookup: %v %v", e, err)
	}
	if g.Len() != 2 || fmt.Sprint(g.Keys()) != "[a b]" {
		t.Fatalf("len %d keys %v", g.Len(), g.Keys())
	}
	if _, err := g.Get("\xff\xfe"); !errors.Is(err, holdoff.ErrInvalidInput) {
		t.Fatalf("non-UTF-8 key: %v", err)
	}
	g.Close()
	if _, err := g.Get("a"); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("closed group: %v", err)
	}
	// The breakers handed out have their own handles: the group's Close leaves them usable.
	if s := a1.Snapshot(); s.State != holdoff.HalfOpen || s.Recoveries != 1 {
		t.Fatalf("a after the group closed: %+v", s)
	}
}

// A group keeps at most MaxKeys breakers: a new key evicts the least recently used idle one,
// or gets an overflow breaker when none is idle; Get never hands out an evicted breaker again.
func TestGroupIsBounded(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1)
	g := must(holdoff.NewBreakerGroup(cfg, holdoff.WithClock(clock), holdoff.WithMaxKeys(2)))
	defer g.Close()
	trip := func(b *holdoff.Breaker) {
		t.Helper()
		if _, err := b.Record(must(b.Allow()), holdoff.Failure); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(want holdoff.GroupSnapshot, keys string) {
		t.Helper()
		if s := g.Snapshot(); s != want || fmt.Sprint(g.Keys()) != keys || g.Len() != want.Keys {
			t.Fatalf("snapshot %+v keys %v len %d, want %+v %s", s, g.Keys(), g.Len(), want, keys)
		}
	}
	a := must(g.Get("a"))
	defer a.Close()
	trip(a) // open: never evicted
	oldB := must(g.Get("b"))
	defer oldB.Close()
	snap(holdoff.GroupSnapshot{Keys: 2, MaxKeys: 2}, "[a b]")
	c := must(g.Get("c")) // b is the idle one: evicted
	defer c.Close()
	snap(holdoff.GroupSnapshot{Keys: 2, MaxKeys: 2, Evictions: 1}, "[a c]")
	// The evicted breaker stays usable through the handle its caller holds...
	trip(oldB)
	if s := oldB.Snapshot(); s.State != holdoff.Open {
		t.Fatalf("evicted b: %+v", s)
	}
	// ...but the group now holds a fresh breaker for b (evicting the idle c).
	newB := must(g.Get("b"))
	defer newB.Close()
	if s := newB.Snapshot(); s.State != holdoff.Closed || s.Opens != 0 {
		t.Fatalf("b after its eviction: %+v", s)
	}
	snap(holdoff.GroupSnapshot{Keys: 2, MaxKeys: 2, Evictions: 2}, "[a b]")
	trip(newB)
	// Nothing idle: d gets an overflow breaker, a new one each time, which admits calls.
	for i := 1; i <= 2; i++ {
		d := must(g.Get("d"))
		if p, err := d.Allow(); err != nil || p.IsProbe() {
			t.Fatalf("overflow breaker: %v", err)
		}
		d.Close()
		snap(holdoff.GroupSnapshot{Keys: 2, MaxKeys: 2, Evictions: 2, Overflows: uint64(i)}, "[a b]")
	}
}

func TestGroupMaxKeysIsValidatedByTheCore(t *testing.T) {
	for _, n := range []int{0, -1, holdoff.MaxKeysLimit + 1} {
		_, err := holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithMaxKeys(n))
		errorOf(t, fmt.Sprintf("max keys %d", n), err, holdoff.ErrInvalidConfig, "group.max_keys")
	}
	g := must(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithMaxKeys(holdoff.MaxKeysLimit)))
	if s := g.Snapshot(); s.MaxKeys != 100_000_000 || s.Keys != 0 {
		t.Fatalf("largest bound: %+v", s)
	}
	g.Close()
	g = must(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig()))
	if s := g.Snapshot(); s.MaxKeys != 10_000 {
		t.Fatalf("default bound: %+v", s)
	}
	g.Close()
	cfg := must(holdoff.ParseConfig([]byte(`{"group": {"max_keys": 3}}`)))
	defer cfg.Close()
	if cfg.Parts() != holdoff.PartGroup {
		t.Fatalf("parts %v", cfg.Parts())
	}
	g = must(cfg.NewBreakerGroup())
	if s := g.Snapshot(); s.MaxKeys != 3 {
		t.Fatalf("configured bound: %+v", s)
	}
	g.Close()
	_, err := cfg.NewBreakerGroup(holdoff.WithMaxKeys(5))
	errorOf(t, "WithMaxKeys on a configuration", err, holdoff.ErrInvalidConfig, "group.max_keys")
	_, err = holdoff.ParseConfig([]byte(`{"group": {"max_keys": 0}}`))
	errorOf(t, "configured zero bound", err, holdoff.ErrInvalidConfig, "group.max_keys")
}

// The core checks leases: given back twice, or to another quota, they are refused with the
// permit errors (field lease) and no bucket moves; a refused foreign lease stays usable.
func TestQuotaLeasesAreCheckedByTheCore(t *testing.T) {
	qcfg := holdoff.QuotaConfig{Capacity: 12, RetryCost: 5, TimeoutCost: 10, SuccessRefill: 1}
	q := must(holdoff.NewRetryQuota(qcfg))
	defer q.Close()
	other := must(holdoff.NewRetryQuota(qcfg))
	defer other.Close()
	l := q.Acquire(false)
	if !l.Acquired() || l.Cost() != 5 || l.Available() != 7 || q.Available() != 7 {
		t.Fatalf("acquire: %v, available %d", l, q.Available())
	}
	empty := q.Acquire(true)
	if empty.Acquired() || empty.Cost() != 10 || q.Available() != 7 {
		t.Fatalf("timeout cost above what is left: %v, available %d", empty, q.Available())
	}
	other.Acquire(false) // 7 left there too
	errorOf(t, "lease given to another quota", other.OnSuccess(l), holdoff.ErrForeignPermit, "lease")
	if q.Available() != 7 || other.Available() != 7 {
		t.Fatalf("foreign lease moved a bucket: %d %d", q.Available(), other.Available())
	}
	if err := q.OnSuccess(l); err != nil || q.Available() != 12 {
		t.Fatalf("refund on its own quota: %v, available %d", err, q.Available())
	}
	errorOf(t, "second refund", q.OnSuccess(l), holdoff.ErrPermitAlreadyRecorded, "lease")
	// The core checks the issuer first: to another quota it stays foreign.
	errorOf(t, "given-back lease to another quota", other.OnSuccess(l), holdoff.ErrForeignPermit, "lease")
	errorOf(t, "lease that was not acquired", q.OnSuccess(empty), holdoff.ErrInvalidInput, "lease")
	if q.Available() != 12 || other.Available() != 7 {
		t.Fatalf("refused leases moved a bucket: %d %d", q.Available(), other.Available())
	}
	if err := other.OnSuccess(nil); err != nil || other.Available() != 8 {
		t.Fatalf("refill without lease: %v, available %d", err, other.Available())
	}
}

// Any integer reaches the core's status check: 0..999 is a status (outside 100..599 a broken
// upstream, a failure), anything else is refused naming the field status.
func TestStatusesArePassedToTheCore(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cls := must(holdoff.NewClassifier(holdoff.ClassifierConfig{FailureStatuses: []int{403}}))
	defer cls.Close()
	for status, want := range map[int]holdoff.Outcome{403: holdoff.Failure, 404: holdoff.Answer, 200: holdoff.Success,
		0: holdoff.Failure, 99: holdoff.Failure, 600: holdoff.Failure, 999: holdoff.Failure} {
		if c := must(cls.Classify(status, nil, now)); c.Outcome != want {
			t.Errorf("status %d: %v, want %v", status, c.Outcome.Kind, want.Kind)
		}
	}
	for _, status := range []int{-1, 1000, 70000, 65536 + 200, math.MaxInt64, math.MinInt64} {
		_, err := cls.Classify(status, nil, now)
		errorOf(t, fmt.Sprintf("classify %d", status), err, holdoff.ErrInvalidInput, "status")
	}
	clock := manualClock(t)
	defer clock.Close()
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock)))
	defer p.Close()
	call := p.NewCall()
	defer call.Close()
	_, permit := must2(p.BeforeAttempt(call))
	_, _, err := p.AfterResponse(call, permit, -1, nil)
	errorOf(t, "after -1", err, holdoff.ErrInvalidInput, "status")
	// The permit was recorded as cancelled: it cannot be recorded again, and counted nothing.
	if _, err := p.AfterAttempt(call, permit, holdoff.Success); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
		t.Fatalf("permit after a refused status: %v", err)
	}
	_, permit = must2(p.BeforeAttempt(call))
	_, _, err = p.AfterResponse(call, permit, 70000, nil)
	errorOf(t, "after 70000", err, holdoff.ErrInvalidInput, "status")
	_, permit = must2(p.BeforeAttempt(call))
	d, c, err := p.AfterResponse(call, permit, 999, nil)
	if err != nil || c.Outcome != holdoff.Failure || d.Kind != holdoff.Retry || d.Source != holdoff.FromBackoff {
		t.Fatalf("after 999: %+v %v %v", d, c, err)
	}
	if s := p.Breaker().Snapshot(); s.Failures != 1 {
		t.Fatalf("one failure counted (the refused values count nothing): %+v", s)
	}
}

func TestShouldRetryHeader(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cls := must(holdoff.NewClassifier(holdoff.ClassifierConfig{}))
	defer cls.Close()
	c := must(cls.Classify(404, []holdoff.Header{{"X-Should-Retry", "true"}}, now))
	if c.Outcome != holdoff.Failure || !c.ShouldRetry || !c.HasShouldRetry {
		t.Fatalf("404 with x-should-retry true: %+v", c)
	}
	c = must(cls.Classify(503, []holdoff.Header{{"x-should-retry", "false"}}, now))
	if c.Outcome != holdoff.Answer || c.ShouldRetry || !c.HasShouldRetry {
		t.Fatalf("503 with x-should-retry false: %+v", c)
	}
	c = must(cls.Classify(503, []holdoff.Header{{"x-should-retry", "maybe"}}, now))
	if c.Outcome != holdoff.Failure || c.HasShouldRetry {
		t.Fatalf("503 with another value: %+v", c)
	}
}

func TestHints(t *testing.T) {
	now := time.Date(1994, 11, 6, 8, 48, 37, 0, time.UTC)
	if h := must(holdoff.ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now)); h.Delay != time.Minute || h.Unusable != holdoff.Usable {
		t.Fatalf("date: %+v", h)
	}
	if h := must(holdoff.ParseRetryAfter("-5", now)); h.Unusable != holdoff.Signed {
		t.Fatalf("signed: %+v", h)
	}
	h := must(holdoff.HintFromHeaders([]holdoff.Header{{"retry-after", "120"}, {"Retry-After", "60"}}, now))
	if h.Unusable != holdoff.Conflicting || h.Source != holdoff.SourceRetryAfter {
		t.Fatalf("conflicting: %+v", h)
	}
	for _, c := range []struct {
		headers []holdoff.Header
		delay   time.Duration
		source  holdoff.HintSource
		name    string
	}{
		{[]holdoff.Header{{"Retry-After", "9"}, {"Retry-After-Ms", "1500.2"}}, 1501 * time.Millisecond,
			holdoff.SourceRetryAfterMs, "retry_after_ms"},
		{[]holdoff.Header{{"Retry-After", "9"}, {"x-ms-retry-after-ms", "250"}}, 250 * time.Millisecond,
			holdoff.SourceXMsRetryAfterMs, "x_ms_retry_after_ms"},
		{[]holdoff.Header{{"RateLimit-Reset", "9"}, {"RateLimit", `"burst";r=0;t=2, "daily";r=500;t=80000`}}, 2 * time.Second,
			holdoff.SourceRateLimit, "ratelimit"},
		{[]holdoff.Header{{"X-RateLimit-Reset", "784111777"}}, 60 * time.Second, holdoff.SourceXRateLimitReset,
			"x_ratelimit_reset"},
	} {
		h := must(holdoff.HintFromHeaders(c.headers, now))
		if h.Unusable != holdoff.Usable || h.Delay != c.delay || h.Source != c.source || h.Source.String() != c.name {
			t.Errorf("%v: %+v (%s)", c.headers, h, h.Source)
		}
	}
	if h := must(holdoff.HintFromHeaders(nil, now)); h.Source != holdoff.SourceNone || h.Source.String() != "none" {
		t.Fatalf("no header: %+v", h)
	}
}

// A wall time the C ABI cannot carry (the zero time.Time, before 1970, after 2262) is refused
// naming the argument, never clamped to the epoch.
func TestWallTimesAreNotClamped(t *testing.T) {
	cls := must(holdoff.NewClassifier(holdoff.ClassifierConfig{}))
	defer cls.Close()
	for _, now := range []time.Time{{}, time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC)} {
		_, err := holdoff.ParseRetryAfter("Thu, 01 Jan 1970 00:01:00 GMT", now)
		errorOf(t, fmt.Sprintf("ParseRetryAfter at %v", now), err, holdoff.ErrInvalidInput, "now")
		_, err = holdoff.HintFromHeaders([]holdoff.Header{{"Retry-After", "5"}}, now)
		errorOf(t, fmt.Sprintf("HintFromHeaders at %v", now), err, holdoff.ErrInvalidInput, "now")
		_, err = cls.Classify(503, nil, now)
		errorOf(t, fmt.Sprintf("Classify at %v", now), err, holdoff.ErrInvalidInput, "now")
	}
	// The epoch itself is a wall time.
	if h := must(holdoff.ParseRetryAfter("Thu, 01 Jan 1970 00:01:00 GMT", time.Unix(0, 0))); h.Delay != time.Minute {
		t.Fatalf("at the epoch: %+v", h)
	}
}

func TestBudgetGiveUpAboveCap(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	if holdoff.DefaultBudgetConfig().GiveUpAboveCap {
		t.Fatal("the default waits the cap")
	}
	for _, giveUp := range []bool{false, true} {
		cfg := holdoff.DefaultBudgetConfig()
		cfg.GiveUpAboveCap = giveUp
		b := must(holdoff.NewRetryBudget(cfg, holdoff.WithClock(clock)))
		s := holdoff.NewRetryState()
		d := must(b.Decide(s, holdoff.RetryLaterOutcome(10*time.Minute)))
		want := holdoff.Decision{Kind: holdoff.Retry, Delay: 5 * time.Minute, Source: holdoff.FromRetryAfter,
			ServerDelay: 10 * time.Minute, HasServerDelay: true, Capped: true}
		if giveUp {
			want = holdoff.Decision{Kind: holdoff.GiveUp, Reason: holdoff.RetryAfterAboveCap,
				ServerDelay: 10 * time.Minute, HasServerDelay: true}
		}
		if d != want {
			t.Errorf("give up above cap %v: %+v, want %+v", giveUp, d, want)
		}
		s.Close()
		b.Close()
	}
	if holdoff.RetryAfterAboveCap.String() != "retry_after_above_cap" || holdoff.TotalTimeout.String() != "total_timeout" {
		t.Fatalf("reason names: %s %s", holdoff.RetryAfterAboveCap, holdoff.TotalTimeout)
	}
}

// Methods without an error result cannot report use after Close: they panic with ErrClosed.
func TestUseAfterClosePanicsWithoutErrorResult(t *testing.T) {
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	b.Close()
	b.Close() // idempotent
	defer func() {
		if err, ok := recover().(error); !ok || !errors.Is(err, holdoff.ErrClosed) {
			t.Fatalf("expected a panic with ErrClosed, got %v", err)
		}
	}()
	b.Snapshot()
}

// Allow's refusal carries the library's refusal exactly: the state, the episode and the time
// to the next probe on the breaker's clock (none while forced open), from a tripped breaker as
// from a forced one, through Allow and Do alike.
func TestAllowRefusalCarriesTheLibrarysRefusal(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	defer b.Close()
	for range 5 {
		record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	}
	refusal := func(when string, err error) *holdoff.BreakerOpenError {
		t.Helper()
		var open *holdoff.BreakerOpenError
		if !errors.As(err, &open) || !errors.Is(err, holdoff.ErrBreakerOpen) ||
			open.Reason != holdoff.BreakerOpenReason || open.Attempts != 0 || open.Err != nil {
			t.Fatalf("%s: want a *BreakerOpenError, got %#v", when, err)
		}
		return open
	}
	clock.Advance(12500 * time.Millisecond)
	p, err := b.Allow()
	if p != nil {
		t.Fatalf("a refusal gave a permit: %+v", p)
	}
	if open := refusal("tripped", err); open.State != holdoff.Open || open.Episode != 1 ||
		!open.HasRetryAfter || open.RetryAfter != 17500*time.Millisecond {
		t.Fatalf("tripped 12.5 s ago: %+v, want open, episode 1, retry after 17.5 s", open)
	}
	clock.Advance(7 * time.Second)
	err = b.Do(context.Background(), func(context.Context) error { t.Fatal("called while open"); return nil })
	if open := refusal("Do", err); open.State != holdoff.Open || open.RetryAfter != 10500*time.Millisecond {
		t.Fatalf("Do 19.5 s after the trip: %+v, want retry after 10.5 s", open)
	}
	if n := b.Snapshot().Refusals; n != 2 {
		t.Fatalf("refusals counted: %d, want 2", n)
	}
	b.ForceOpen()
	if open := refusal("forced", second(b.Allow())); open.State != holdoff.ForcedOpen || open.Episode != 2 ||
		open.HasRetryAfter || open.RetryAfter != 0 {
		t.Fatalf("forced open: %+v, want forced_open, episode 2, no retry time", open)
	}
}

// A breaker made without WithClock reads the system clock that all such breakers share: its
// refusal still counts from its own trip.
func TestSystemClockBreakerRefusal(t *testing.T) {
	settle() // the finalizers of what earlier tests dropped
	before := holdoff.LiveHandles()
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	if n := holdoff.LiveHandles(); n != before+1 {
		t.Fatalf("a breaker with the shared clock added %d handles, want 1", n-before)
	}
	for range 5 {
		record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	}
	var open *holdoff.BreakerOpenError
	if _, err := b.Allow(); !errors.As(err, &open) || !open.HasRetryAfter ||
		open.RetryAfter <= 0 || open.RetryAfter > 30*time.Second {
		t.Fatalf("refusal: %v, want a retry time in (0, 30 s]", err)
	}
	b.Close() // it made calls: its finalizer frees it
	b = nil
	for i := 0; i < 100 && holdoff.LiveHandles() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := holdoff.LiveHandles(); n > before {
		t.Fatalf("%d handles left, want %d", n, before)
	}
}

// NewBreaker reuses the last configuration's JSON only for the same configuration: breakers
// made one after another from different configurations each trip at their own threshold.
func TestNewBreakerFollowsEachConfiguration(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	two := holdoff.DefaultBreakerConfig()
	two.Trip = holdoff.ConsecutiveFailures(2)
	for i, c := range []struct {
		cfg  holdoff.BreakerConfig
		trip int
	}{{two, 2}, {two, 2}, {holdoff.DefaultBreakerConfig(), 5}, {two, 2}, {holdoff.DefaultBreakerConfig(), 5}} {
		b := must(holdoff.NewBreaker(c.cfg, holdoff.WithClock(clock)))
		for n := 1; n <= c.trip; n++ {
			if s := b.Snapshot(); s.State != holdoff.Closed {
				t.Fatalf("breaker %d: %s after %d failures, want closed until %d", i, s.State, n-1, c.trip)
			}
			record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
		}
		if s := b.Snapshot(); s.State != holdoff.Open {
			t.Fatalf("breaker %d: %s after %d failures, want open", i, s.State, c.trip)
		}
		b.Close()
	}
	// A configuration the core refuses is refused every time, naming the field.
	bad := holdoff.DefaultBreakerConfig()
	bad.Recoveries = 0
	for range 2 {
		if _, err := holdoff.NewBreaker(bad); fieldOf(t, err) != "breaker.recoveries" {
			t.Fatalf("recoveries 0: %v", err)
		}
	}
}

// The wrapper stays in Go's 24-byte size class: a program may keep one per upstream key.
func TestBreakerWrapperSize(t *testing.T) {
	if n := holdoff.BreakerWrapperSize; n > 24 {
		t.Fatalf("Breaker is %d bytes, want at most 24", n)
	}
}

func second[T any](_ T, err error) error { return err }

// A dropped object's handle is released by its cleanup once the GC finds it unreachable.
func TestCleanupReleasesDroppedHandles(t *testing.T) {
	before := holdoff.LiveHandles()
	func() {
		for i := 0; i < 10; i++ {
			must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
		}
	}()
	if holdoff.LiveHandles() < before+10 {
		t.Fatal("expected 10 live breakers")
	}
	for i := 0; i < 100 && holdoff.LiveHandles() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := holdoff.LiveHandles(); n > before {
		t.Fatalf("%d handles not released", n-before)
	}
}

// Goroutines share one breaker; run with -race. Interleaved failures never reach the
// threshold, so every call is admitted and every record counts; a permit shared by every
// goroutine is recorded exactly once.
func TestStressSharedBreaker(t *testing.T) {
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1000000)
	b := must(holdoff.NewBreaker(cfg))
	defer b.Close()
	shared := must(b.Allow())
	const goroutines, calls = 16, 2000
	var wg sync.WaitGroup
	var counted, already atomic.Int64
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				o := holdoff.Success
				if (i+g)%7 == 0 {
					o = holdoff.Failure
				}
				if err := b.Do(context.Background(), func(context.Context) error {
					if o == holdoff.Failure {
						return errors.New("fail")
					}
					return nil
				}); err != nil && o != holdoff.Failure {
					t.Error(err)
				}
				counted.Add(1)
			}
			if _, err := b.Record(shared, holdoff.Success); errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
				already.Add(1)
			}
			_ = b.Snapshot()
		}(g)
	}
	wg.Wait()
	if counted.Load() != goroutines*calls || already.Load() != goroutines-1 {
		t.Fatalf("counted %d, already-recorded %d", counted.Load(), already.Load())
	}
	if s := b.Snapshot(); s.State != holdoff.Closed || s.Refusals != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestManualClockRefusesOriginsOutsideUnixNanos(t *testing.T) {
	for _, origin := range []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC),
	} {
		if c, err := holdoff.NewManualClock(origin); !errors.Is(err, holdoff.ErrInvalidInput) || fieldOf(t, err) != "wall_origin" {
			t.Fatalf("origin %v: clock %v err %v", origin, c, err)
		}
	}
	origin := time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC)
	c := must(holdoff.NewManualClock(origin))
	defer c.Close()
	if !c.WallNow().Equal(origin) {
		t.Fatalf("wall now %v, want %v", c.WallNow(), origin)
	}
}

func TestUseAfterCloseReturnsErrClosed(t *testing.T) {
	clock := manualClock(t)
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	budget := must(holdoff.NewRetryBudget(holdoff.DefaultBudgetConfig(), holdoff.WithClock(clock)))
	permit := must(b.Allow())
	b.Close()
	if _, err := b.Allow(); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Allow: %v", err)
	}
	if _, err := b.Record(permit, holdoff.Success); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Record: %v", err)
	}
	if err := b.Do(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Do: %v", err)
	}
	if _, err := holdoff.ComposePolicy(b, budget, nil, nil); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("policy of a closed breaker: %v", err)
	}
	budget.Close()
	clock.Close()
	if err := clock.Advance(time.Second); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Advance: %v", err)
	}
	if _, err := holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("closed clock option: %v", err)
	}
	cls := must(holdoff.NewClassifier(holdoff.ClassifierConfig{}))
	cls.Close()
	if _, err := cls.Classify(200, nil, time.Unix(0, 0)); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Classify: %v", err)
	}
}

// expectClosedPanic runs f and fails unless it panics with an error matching ErrClosed.
func expectClosedPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if err, ok := recover().(error); !ok || !errors.Is(err, holdoff.ErrClosed) {
			t.Errorf("%s after Close: expected a panic with ErrClosed, got %v", what, err)
		}
	}()
	f()
}

// Every BreakerGroup method after Close: Get reports ErrClosed, those without an error result
// (Len, Snapshot, Keys) panic with it, Close stays a no-op, and the breakers it handed out
// keep working on their own handles.
func TestBreakerGroupUseAfterClose(t *testing.T) {
	g := must(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig()))
	a := must(g.Get("a"))
	defer a.Close()
	if n := g.Len(); n != 1 {
		t.Fatalf("Len before Close: %d, want 1", n)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := g.Get("a"); !errors.Is(err, holdoff.ErrClosed) {
		t.Errorf("Get of a known key after Close: %v", err)
	}
	if _, err := g.Get("new"); !errors.Is(err, holdoff.ErrClosed) {
		t.Errorf("Get of a new key after Close: %v", err)
	}
	expectClosedPanic(t, "Len", func() { g.Len() })
	expectClosedPanic(t, "Snapshot", func() { g.Snapshot() })
	expectClosedPanic(t, "Keys", func() { g.Keys() })
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if e, err := a.Record(must(a.Allow()), holdoff.Success); err != nil || e != holdoff.Counted {
		t.Errorf("a breaker of the closed group: %v %v", e, err)
	}
}

// A Close between two passes of DrainEvents (the queue holds more events than one pass
// takes) must not lose the events already taken: the drain holds the handle throughout and
// returns them all; the handle is freed when it returns.
func TestDrainEventsSurvivesCloseBetweenPasses(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	const pairs = 40 // 80 events: more than two passes
	for i := 0; i < pairs; i++ {
		b.ForceOpen()
		b.Reset()
	}
	passes := 0
	restore := holdoff.SetDrainPassHook(func() {
		passes++
		if passes == 1 {
			b.Close()
		}
	})
	defer restore()
	var evs []holdoff.StateChange
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("DrainEvents panicked after Close between passes: %v", r)
			}
		}()
		evs = b.DrainEvents()
	}()
	if passes == 0 {
		t.Fatal("the drain took a single pass: the hook never ran")
	}
	if len(evs) != 2*pairs {
		t.Fatalf("drained %d events, want %d", len(evs), 2*pairs)
	}
	for i, e := range evs {
		if want := holdoff.ForcedOpen; i%2 == 1 {
			if e.To != holdoff.Closed {
				t.Fatalf("event %d: %+v, want a reset to closed", i, e)
			}
		} else if e.To != want {
			t.Fatalf("event %d: %+v, want forced open", i, e)
		}
	}
	expectClosedPanic(t, "DrainEvents", func() { b.DrainEvents() })
}
