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
	const n = 10 // half through Allow, half through TryAllow
	if calls := libraryCalls(func() {
		for i := range n {
			if i%2 == 0 {
				refusedNow(t, b)
			} else {
				tryRefused(t, b)
			}
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

// Goroutines refusing in place (through Allow and TryAllow) race goroutines whose probes and
// failures go through the library (a 1 ms interval on the system clock, so probes fall due all
// along): every refusal any caller saw is in the snapshot's count, exactly; every wait Allow
// gives is within the interval; and no failure is lost: each failure the library counted for a
// call admitted while closed is one trip (threshold 1), so the snapshot's opens are those
// failures plus the first trip.
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
					// Half the goroutines ask through TryAllow, half through Allow.
					var p *holdoff.Permit
					if w%2 == 1 {
						tp, ok := b.TryAllow()
						if !ok {
							refusals.Add(1)
							continue
						}
						p = &tp
					} else {
						var err error
						p, err = b.Allow()
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

// tryRefused is TryAllow's refusal, failing the test if it admitted or returned a non-zero
// permit.
func tryRefused(t *testing.T, b *holdoff.Breaker) {
	t.Helper()
	if p, ok := b.TryAllow(); ok || p != (holdoff.Permit{}) {
		t.Fatalf("TryAllow: %v, %+v; want false and a zero permit", ok, p)
	}
}

// TryAllow refuses a tripped breaker on the shared system clock in place, as Allow does: no
// library call, no allocation, and each refusal in the snapshot's count.
func TestTryAllowRefusesInPlace(t *testing.T) {
	b := openBreaker(t, 30*time.Second)
	if n := libraryCalls(func() {
		for range 100 {
			tryRefused(t, b)
		}
	}); n != 0 {
		t.Fatalf("100 refusals made %d library calls, want 0", n)
	}
	if s := b.Snapshot(); s.Refusals != 100 || s.State != holdoff.Open {
		t.Fatalf("snapshot: %+v; want open with 100 refusals", s)
	}
	const runs = 1000
	if a := testing.AllocsPerRun(runs, func() { tryRefused(t, b) }); a != 0 {
		t.Fatalf("a refusal in place allocates %v times, want 0", a)
	}
	// AllocsPerRun makes one more call than runs, to warm up.
	if got, want := b.Snapshot().Refusals, uint64(100+runs+1); got != want {
		t.Fatalf("snapshot counts %d refusals, want %d", got, want)
	}
	// Allow and TryAllow share the count.
	refusedNow(t, b)
	if got, want := b.Snapshot().Refusals, uint64(100+runs+2); got != want {
		t.Fatalf("snapshot counts %d refusals, want %d", got, want)
	}

	b.ForceOpen()
	if n := libraryCalls(func() { tryRefused(t, b) }); n != 0 {
		t.Fatalf("a forced-open refusal made %d library calls, want 0", n)
	}
	if got, want := b.Snapshot().Refusals, uint64(100+runs+3); got != want {
		t.Fatalf("snapshot counts %d refusals, want %d", got, want)
	}
}

// On a manual clock TryAllow's refusal goes through the library, and is counted there; once the
// clock passes the open interval, it admits the probe.
func TestTryAllowCrossesOnAManualClock(t *testing.T) {
	b, clock := fastBreaker(t, 1)
	record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	before := b.Snapshot()
	if before.State != holdoff.Open || !before.HasRetryAfter {
		t.Fatalf("not tripped: %+v", before)
	}
	if n := libraryCalls(func() { tryRefused(t, b) }); n != 1 {
		t.Fatalf("a manual clock's refusal made %d library calls, want 1", n)
	}
	if got := b.Snapshot().Refusals; got != before.Refusals+1 {
		t.Fatalf("snapshot counts %d refusals, want %d", got, before.Refusals+1)
	}
	if err := clock.Advance(before.RetryAfter); err != nil {
		t.Fatal(err)
	}
	p, ok := b.TryAllow()
	if !ok || !p.IsProbe() || p.Episode() != 1 {
		t.Fatalf("TryAllow at the deadline: %v, probe %v, episode %d; want the probe of episode 1", ok, p.IsProbe(), p.Episode())
	}
	tryRefused(t, b) // the one probe slot is taken
	record(t, b, &p, holdoff.Success, holdoff.Counted)
	// The default configuration wants more than one probe answer: the first leaves it half-open.
	if s := b.Snapshot(); s.State != holdoff.HalfOpen || s.Recoveries != 1 || s.Probes != 1 || s.Refusals != before.Refusals+2 {
		t.Fatalf("after the probe's success: %+v", s)
	}
}

// Past the deadline on the system clock, TryAllow admits the probe (through the library).
func TestTryAllowAdmitsTheProbeAfterTheDeadline(t *testing.T) {
	b := openBreaker(t, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // only ever later than the 1 ms deadline
	var p holdoff.Permit
	var ok bool
	if n := libraryCalls(func() { p, ok = b.TryAllow() }); n != 1 || !ok {
		t.Fatalf("a due probe: %v with %d library calls, want true with 1", ok, n)
	}
	if !p.IsProbe() || p.Episode() != 1 {
		t.Fatalf("want the probe of episode 1: probe %v, episode %d", p.IsProbe(), p.Episode())
	}
	record(t, b, &p, holdoff.Success, holdoff.Counted)
	if s := b.Snapshot(); s.State != holdoff.Closed || s.Refusals != 0 {
		t.Fatalf("the probe's success did not close it: %+v", s)
	}
}

// A closed breaker's TryAllow admits on the fast-path word, without allocating; its permit is
// recorded once, as Allow's.
func TestTryAllowAdmitsWhileClosed(t *testing.T) {
	b, _ := fastBreaker(t, 3)
	if n := libraryCalls(func() {
		p, ok := b.TryAllow()
		if !ok || p.IsProbe() || p.Episode() != 0 {
			t.Fatalf("TryAllow while closed: %v, probe %v, episode %d", ok, p.IsProbe(), p.Episode())
		}
		record(t, b, &p, holdoff.Success, holdoff.Counted)
	}); n != 0 {
		t.Fatalf("a healthy TryAllow and Record made %d library calls, want 0", n)
	}
	p, _ := b.TryAllow()
	record(t, b, &p, holdoff.Success, holdoff.Counted)
	if _, err := b.Record(&p, holdoff.Success); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
		t.Fatalf("second record: %v, want ErrPermitAlreadyRecorded", err)
	}
	if a := testing.AllocsPerRun(1000, func() {
		p, ok := b.TryAllow()
		if !ok {
			t.Fatal("refused while closed")
		}
		b.Record(&p, holdoff.Success)
	}); a != 0 {
		t.Fatalf("TryAllow + Record allocate %v times, want 0", a)
	}
	// A failure through a TryAllow permit counts as Allow's.
	for range 3 {
		p, _ := b.TryAllow()
		record(t, b, &p, holdoff.Failure, holdoff.Counted)
	}
	if s := b.Snapshot(); s.State != holdoff.Open || s.Opens != 1 {
		t.Fatalf("three failures did not trip it: %+v", s)
	}
}

// A breaker that cannot admit at all (closed, nil) makes TryAllow return false, and Err says why,
// as Allow's error would.
func TestTryAllowAfterClose(t *testing.T) {
	for _, name := range []string{"open", "closed"} {
		t.Run(name, func(t *testing.T) {
			var b *holdoff.Breaker
			if name == "open" {
				b = openBreaker(t, 30*time.Second) // refuses in place until Close
			} else {
				b, _ = fastBreaker(t, 3)
			}
			if err := b.Err(); err != nil {
				t.Fatalf("Err before Close: %v", err)
			}
			b.Close()
			if n := libraryCalls(func() { tryRefused(t, b) }); n != 0 {
				t.Fatalf("TryAllow after Close made %d library calls", n)
			}
			if err := b.Err(); !errors.Is(err, holdoff.ErrClosed) {
				t.Fatalf("Err after Close: %v, want ErrClosed", err)
			}
			if _, err := b.Allow(); !errors.Is(err, holdoff.ErrClosed) {
				t.Fatalf("Allow after Close: %v, want ErrClosed", err)
			}
		})
	}
	var nilBreaker *holdoff.Breaker
	tryRefused(t, nilBreaker)
	var e *holdoff.Error
	if err := nilBreaker.Err(); !errors.Is(err, holdoff.ErrInvalidInput) || !errors.As(err, &e) || e.Field != "breaker" {
		t.Fatalf("Err of a nil breaker: %v, want ErrInvalidInput naming breaker", err)
	}
}
