package holdoff_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	holdoff "holdoff.dev/go"
)

// openBreaker is a breaker on the shared system clock (no WithClock) whose open interval is
// interval (constant), tripped by one failure and closed by one probe's success; its first call pinned it, so that refusals may
// be decided in place.
func openBreaker(t *testing.T, interval time.Duration) *holdoff.Breaker {
	t.Helper()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1)
	cfg.OpenInterval = holdoff.Backoff{Initial: interval, Multiplier: 1, Max: interval}
	cfg.Recoveries = 1
	b := must(holdoff.NewBreaker(cfg))
	t.Cleanup(func() { b.Close() })
	record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	if s := b.Snapshot(); s.State != holdoff.Open || s.Episode != 1 {
		t.Fatalf("not tripped: %+v", s)
	}
	return b
}

// refusedNow is Allow's refusal, failing the test if it admitted or gave another error.
func refusedNow(t *testing.T, b *holdoff.Breaker) *holdoff.BreakerOpenError {
	t.Helper()
	p, err := b.Allow()
	var open *holdoff.BreakerOpenError
	if p != nil || !errors.As(err, &open) {
		t.Fatalf("Allow: %v, %v; want a *BreakerOpenError", p, err)
	}
	return open
}

// An open breaker on the shared system clock refuses without calling the library, with the
// error and the count the library would give.
func TestRefusalInPlaceIsTheLibrarys(t *testing.T) {
	const interval = 30 * time.Second
	b := openBreaker(t, interval)
	var last *holdoff.BreakerOpenError
	if n := libraryCalls(func() {
		for range 100 {
			last = refusedNow(t, b)
		}
	}); n != 0 {
		t.Fatalf("100 refusals made %d library calls, want 0", n)
	}
	if last.State != holdoff.Open || last.Episode != 1 || !last.HasRetryAfter ||
		last.RetryAfter <= 0 || last.RetryAfter > interval || last.Reason != holdoff.BreakerOpenReason ||
		last.Attempts != 0 || last.Err != nil || !errors.Is(last, holdoff.ErrBreakerOpen) {
		t.Fatalf("refusal in place: %+v", last)
	}
	s := b.Snapshot()
	if s.Refusals != 100 {
		t.Fatalf("snapshot counts %d refusals, want 100", s.Refusals)
	}
	if !s.HasRetryAfter || s.RetryAfter <= 0 || s.RetryAfter > interval {
		t.Fatalf("the library's wait: %+v", s)
	}

	// Do refuses the same way, without calling fn.
	if n := libraryCalls(func() {
		err := b.Do(context.Background(), func(context.Context) error {
			t.Fatal("fn called while open")
			return nil
		})
		if !errors.As(err, &last) || last.State != holdoff.Open || last.RetryAfter <= 0 {
			t.Fatalf("Do while open: %v", err)
		}
	}); n != 0 {
		t.Fatalf("Do's refusal made %d library calls, want 0", n)
	}
	if got := b.Snapshot().Refusals; got != 101 {
		t.Fatalf("snapshot counts %d refusals, want 101", got)
	}

	// Forced open: refused in place too, with no retry time.
	b.ForceOpen()
	if n := libraryCalls(func() { last = refusedNow(t, b) }); n != 0 {
		t.Fatalf("forced-open refusal made %d library calls", n)
	}
	if last.State != holdoff.ForcedOpen || last.HasRetryAfter || last.Episode != 2 {
		t.Fatalf("forced-open refusal: %+v", last)
	}
	if got := b.Snapshot().Refusals; got != 102 {
		t.Fatalf("snapshot counts %d refusals, want 102", got)
	}
}

// Past the deadline the library decides: a probe is admitted, not refused.
func TestRefusalInPlaceEndsAtTheDeadline(t *testing.T) {
	b := openBreaker(t, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // only ever later than the 1 ms deadline
	var p *holdoff.Permit
	if n := libraryCalls(func() { p = must(b.Allow()) }); n != 1 {
		t.Fatalf("a due probe made %d library calls, want 1", n)
	}
	if !p.IsProbe() || p.Episode() != 1 {
		t.Fatalf("want the probe of episode 1: probe %v, episode %d", p.IsProbe(), p.Episode())
	}
	record(t, b, p, holdoff.Success, holdoff.Counted)
	if s := b.Snapshot(); s.State != holdoff.Closed {
		t.Fatalf("the probe's success did not close it: %+v", s)
	}
}

// A wait longer than a Duration holds (an open interval of centuries, from a JSON
// configuration) saturates in place as through the library, never wrapping to a negative one.
func TestRefusalInPlaceSaturatesItsWait(t *testing.T) {
	cfg := must(holdoff.ParseConfig([]byte(`{"breaker": {"trip": {"policy": "consecutive", "threshold": 1},
		"open_interval": {"initial_ms": 18000000000000, "multiplier": 1}}}`)))
	b := must(cfg.NewBreaker())
	defer b.Close()
	record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	const most = time.Duration(math.MaxInt64)
	if s := b.Snapshot(); s.RetryAfter != most {
		t.Fatalf("the library's wait: %v, want %v", s.RetryAfter, most)
	}
	var open *holdoff.BreakerOpenError
	if n := libraryCalls(func() { open = refusedNow(t, b) }); n != 0 {
		t.Fatalf("the refusal made %d library calls, want 0 (decided in place)", n)
	}
	if !open.HasRetryAfter || open.RetryAfter != most {
		t.Fatalf("refused in place with RetryAfter %v, want %v", open.RetryAfter, most)
	}
}

// What cannot be decided in place crosses: a manual clock's breaker, and a breaker whose
// metrics count every refusal.
func TestRefusalCrossesWhenItMust(t *testing.T) {
	mb, _ := fastBreaker(t, 1)
	record(t, mb, must(mb.Allow()), holdoff.Failure, holdoff.Counted)
	if n := libraryCalls(func() { refusedNow(t, mb) }); n != 1 {
		t.Fatalf("a manual clock's refusal made %d library calls, want 1", n)
	}

	b := openBreaker(t, 30*time.Second)
	refusedNow(t, b)
	must(b.Metrics())
	const n = 10
	if calls := libraryCalls(func() {
		for range n {
			refusedNow(t, b)
		}
	}); calls != n {
		t.Fatalf("%d library calls for %d counted refusals, want %d", calls, n, n)
	}
	got := map[string]float64{}
	for _, r := range must(b.Metrics()) {
		got[r.Series()] = r.Value
	}
	if got["holdoff.breaker.refused"] != n {
		t.Fatalf("metrics count %v refusals, want %d: %v", got["holdoff.breaker.refused"], n, got)
	}
	if s := b.Snapshot(); s.Refusals != n+1 {
		t.Fatalf("snapshot counts %d refusals, want %d", s.Refusals, n+1)
	}
}

// Goroutines refusing in place race goroutines whose probes and failures go through the library
// (a 1 ms interval on the system clock, so probes fall due all along): every refusal any caller
// saw is in the snapshot's count, exactly; every wait is within the interval; and no failure is
// lost: each failure the library counted for a call admitted while closed is one trip
// (threshold 1), so the snapshot's opens are those failures plus the first trip.
func TestStressRefusalInPlaceAgainstLibrary(t *testing.T) {
	const interval = time.Millisecond
	b := openBreaker(t, interval)
	const workers, calls = 8, 4000
	var refusals, probes, closedFailures, failureRecords atomic.Int64
	var bad atomic.Pointer[string]
	fail := func(msg string) { bad.Store(&msg) }
	libCalls, stop := holdoff.CountLibraryCalls()
	defer stop()
	runWithDeadline(t, func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					p, err := b.Allow()
					var open *holdoff.BreakerOpenError
					switch {
					case errors.As(err, &open):
						refusals.Add(1)
						if !open.HasRetryAfter || open.RetryAfter <= 0 || open.RetryAfter > interval {
							fail(open.Error())
						}
						continue
					case err != nil:
						fail(err.Error())
						return
					}
					probe := p.IsProbe()
					if probe {
						probes.Add(1)
					}
					// Mostly failures, so it keeps tripping; now and then a success closes it.
					o := holdoff.Failure
					if (i+w)%7 == 0 {
						o = holdoff.Success
					}
					e, err := b.Record(p, o)
					if err != nil {
						fail(err.Error())
						return
					}
					if o == holdoff.Failure {
						failureRecords.Add(1)
						if !probe && e == holdoff.Counted {
							closedFailures.Add(1)
						}
					}
				}
			}()
		}
		wg.Wait()
	})
	if m := bad.Load(); m != nil {
		t.Fatal(*m)
	}
	s := b.Snapshot()
	// openBreaker's trip refused nothing: every refusal since is a caller's.
	if s.Refusals != uint64(refusals.Load()) {
		t.Fatalf("snapshot counts %d refusals, callers saw %d", s.Refusals, refusals.Load())
	}
	if s.Opens != uint64(closedFailures.Load())+1 {
		t.Fatalf("%d opens for %d counted closed failures (+1 first trip)", s.Opens, closedFailures.Load())
	}
	if s.Probes != uint64(probes.Load()) || refusals.Load() == 0 || probes.Load() == 0 {
		t.Fatalf("the library's books: %+v; callers saw %d probes, %d refusals", s, probes.Load(), refusals.Load())
	}
	// Every failure is recorded through the library; the library's other calls are admissions
	// (and some successes), so at least this many refusals made no call: the race was run.
	inPlace := refusals.Load() - (libCalls.Load() - failureRecords.Load())
	if inPlace <= 0 {
		t.Fatalf("no refusal decided in place: %d refusals, %d library calls, %d failures recorded",
			refusals.Load(), libCalls.Load(), failureRecords.Load())
	}
	t.Logf("%d refusals (at least %d in place), %d probes, %d opens", refusals.Load(), inPlace, probes.Load(), s.Opens)
}

// A refusal allocates its *BreakerOpenError: 64 bytes (a size class) on 64-bit platforms.
func TestBreakerOpenErrorSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("64-bit layout")
	}
	if n := unsafe.Sizeof(holdoff.BreakerOpenError{}); n != 64 {
		t.Fatalf("*BreakerOpenError is %d bytes, want 64", n)
	}
}
