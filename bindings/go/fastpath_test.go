package holdoff_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	holdoff "holdoff.dev/go"
)

// fastBreaker is a breaker on a manual clock, tripping after threshold consecutive failures,
// warmed up by one call so that the next calls may take the fast path.
func fastBreaker(t *testing.T, threshold int) (*holdoff.Breaker, *holdoff.ManualClock) {
	t.Helper()
	clock := manualClock(t)
	t.Cleanup(func() { clock.Close() })
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(threshold)
	b := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	t.Cleanup(func() { b.Close() })
	if !holdoff.UsesFastPath(b) {
		t.Fatal("a local breaker must read its fast-path word")
	}
	if _, err := b.Record(must(b.Allow()), holdoff.Success); err != nil {
		t.Fatal(err)
	}
	return b, clock
}

// libraryCalls runs f and returns how many admissions and records went through the C library.
func libraryCalls(f func()) int64 {
	n, stop := holdoff.CountLibraryCalls()
	defer stop()
	f()
	return n.Load()
}

func record(t *testing.T, b *holdoff.Breaker, p *holdoff.Permit, o holdoff.Outcome, want holdoff.Effect) {
	t.Helper()
	if e, err := b.Record(p, o); err != nil || e != want {
		t.Fatalf("Record(%v): %v, %v; want %v", o.Kind, e, err, want)
	}
}

// Healthy calls never reach the library; whatever the word cannot decide does, and the
// breaker's books show it.
func TestFastPathTakenOnlyWhenHealthy(t *testing.T) {
	b, _ := fastBreaker(t, 3)
	ctx := context.Background()
	if n := libraryCalls(func() {
		for range 1000 {
			p := must(b.Allow())
			if p.IsProbe() || p.Episode() != 0 {
				t.Fatalf("a closed breaker's permit: probe %v, episode %d", p.IsProbe(), p.Episode())
			}
			record(t, b, p, holdoff.Success, holdoff.Counted)
		}
		for range 1000 {
			if err := b.Do(ctx, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}); n != 0 {
		t.Fatalf("2000 healthy calls made %d library calls, want 0", n)
	}

	// A failure is recorded by the library; admission stays on the word (failures pending still
	// admit), the next success must reach the library to forget the failure, the one after not.
	if n := libraryCalls(func() { record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted) }); n != 1 {
		t.Fatalf("allow + failure: %d library calls, want 1 (the record)", n)
	}
	if s := b.Snapshot(); s.Failures != 1 {
		t.Fatalf("failure not counted: %+v", s)
	}
	if n := libraryCalls(func() { record(t, b, must(b.Allow()), holdoff.Success, holdoff.Counted) }); n != 1 {
		t.Fatalf("success after a failure: %d library calls, want 1", n)
	}
	if s := b.Snapshot(); s.Failures != 0 {
		t.Fatalf("the success did not reset the failures: %+v", s)
	}
	// Other outcomes always go to the library, even when healthy.
	for _, o := range []holdoff.Outcome{holdoff.Answer, holdoff.Cancelled, holdoff.Timeout} {
		if n := libraryCalls(func() { must(b.Record(must(b.Allow()), o)) }); n != 1 {
			t.Fatalf("%v: %d library calls, want 1", o.Kind, n)
		}
	}
	if n := libraryCalls(func() {
		if err := b.Do(ctx, func(context.Context) error { return errors.New("down") }); err == nil {
			t.Fatal("Do lost fn's error")
		}
	}); n != 1 {
		t.Fatalf("Do with a failure: %d library calls, want 1", n)
	}
	if s := b.Snapshot(); s.Failures != 2 || s.State != holdoff.Closed {
		t.Fatalf("timeout and failure not counted: %+v", s)
	}
	// The third consecutive failure trips: refusals cross (the word does not admit).
	record(t, b, must(b.Allow()), holdoff.Failure, holdoff.Counted)
	if n := libraryCalls(func() {
		if _, err := b.Allow(); !errors.Is(err, holdoff.ErrBreakerOpen) {
			t.Fatalf("open breaker admitted: %v", err)
		}
	}); n != 1 {
		t.Fatalf("refusal: %d library calls, want 1", n)
	}
	if s := b.Snapshot(); s.State != holdoff.Open || s.Opens != 1 || s.Refusals != 1 {
		t.Fatalf("after the trip: %+v", s)
	}

	// Disabled: admitted and counted by the library (the word's state is not closed).
	b.Disable()
	if n := libraryCalls(func() { record(t, b, must(b.Allow()), holdoff.Success, holdoff.Counted) }); n != 2 {
		t.Fatalf("disabled: %d library calls, want 2", n)
	}
	b.Reset()
	if n := libraryCalls(func() { record(t, b, must(b.Allow()), holdoff.Success, holdoff.Counted) }); n != 0 {
		t.Fatalf("after Reset: %d library calls, want 0", n)
	}
}

// Once the breaker's metrics are read, every call is counted, so every call crosses.
func TestFastPathOffWhileMetricsCount(t *testing.T) {
	b, _ := fastBreaker(t, 5)
	must(b.Metrics())
	const pairs = 100
	if n := libraryCalls(func() {
		for range pairs {
			record(t, b, must(b.Allow()), holdoff.Success, holdoff.Counted)
		}
	}); n != 2*pairs {
		t.Fatalf("%d library calls for %d counted pairs, want %d", n, pairs, 2*pairs)
	}
	got := map[string]float64{}
	for _, r := range must(b.Metrics()) {
		got[r.Series()] = r.Value
	}
	if got["holdoff.breaker.admitted"] != pairs || got["holdoff.breaker.outcomes{outcome=success}"] != pairs {
		t.Fatalf("metrics missed fast calls: %v", got)
	}
}

// A permit admitted on the word behaves as one from the library.
func TestFastPermitIsALibraryPermit(t *testing.T) {
	b, _ := fastBreaker(t, 5)
	other, _ := fastBreaker(t, 5)

	p := must(b.Allow())
	record(t, b, p, holdoff.Success, holdoff.Counted)
	for _, o := range []holdoff.Outcome{holdoff.Success, holdoff.Failure} {
		if _, err := b.Record(p, o); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
			t.Fatalf("second record (%v) of a fast-recorded permit: %v", o.Kind, err)
		}
	}
	// Recorded by the library first, then a success the word would take: still refused.
	p = must(b.Allow())
	record(t, b, p, holdoff.Cancelled, holdoff.Ignored)
	if _, err := b.Record(p, holdoff.Success); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
		t.Fatalf("success after Cancelled: %v", err)
	}
	// Another breaker refuses it, and it stays usable on its own.
	p = must(b.Allow())
	for _, o := range []holdoff.Outcome{holdoff.Success, holdoff.Failure} {
		if _, err := other.Record(p, o); !errors.Is(err, holdoff.ErrForeignPermit) {
			t.Fatalf("foreign record (%v): %v", o.Kind, err)
		}
	}
	record(t, b, p, holdoff.Success, holdoff.Counted)
	// A negative delay is refused before anything is recorded, as through the library.
	p = must(b.Allow())
	if _, err := b.Record(p, holdoff.Outcome{Kind: holdoff.KindSuccess, Delay: -1}); !errors.Is(err, holdoff.ErrInvalidInput) {
		t.Fatalf("negative delay: %v", err)
	}
	record(t, b, p, holdoff.Success, holdoff.Counted)

	// Two goroutines record one fast permit: exactly one wins, whichever path each takes.
	for i := range 200 {
		p := must(b.Allow())
		outcomes := [2]holdoff.Outcome{holdoff.Success, holdoff.Success}
		if i%2 == 1 {
			outcomes[1] = holdoff.Cancelled
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for _, o := range outcomes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.Record(p, o)
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, holdoff.ErrPermitAlreadyRecorded):
					t.Errorf("concurrent record: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d records of one permit succeeded, want 1", wins.Load())
		}
	}
	if s := b.Snapshot(); s.Failures != 0 || s.StaleAnswers != 0 || s.State != holdoff.Closed {
		t.Fatalf("%+v", s)
	}
}

// After Close, fast calls report ErrClosed as the others do, permits admitted before included.
func TestFastPathAfterClose(t *testing.T) {
	b, _ := fastBreaker(t, 5)
	p := must(b.Allow())
	b.Close()
	if _, err := b.Allow(); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Allow after Close: %v", err)
	}
	if _, err := b.Record(p, holdoff.Success); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Record after Close: %v", err)
	}
	if err := b.Do(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

// A fleet's breaker never reads the word, so its Close frees it at once (joining the fleet's
// thread).
func TestFleetBreakerHasNoFastPath(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Fleet = &holdoff.FleetConfig{URL: "memory://fast-path-test", Key: "fast"}
	live := holdoff.LiveHandles()
	b := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	if holdoff.UsesFastPath(b) {
		t.Fatal("a fleet's breaker reads the fast-path word")
	}
	if n := libraryCalls(func() { record(t, b, must(b.Allow()), holdoff.Success, holdoff.Counted) }); n != 2 {
		t.Fatalf("%d library calls, want 2", n)
	}
	b.Close()
	if n := holdoff.LiveHandles(); n != live {
		t.Fatalf("%d handles alive after Close, want %d", n, live)
	}
}

// A breaker that never made a call is freed by Close; one that did is freed by its finalizer,
// once nothing can be reading its word, and reports ErrClosed meanwhile.
func TestClosedBreakerFreedWhenNoReaderCanRemain(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	settle() // the cleanups of what earlier tests dropped
	live := holdoff.LiveHandles()
	idle := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	idle.Close()
	if n := holdoff.LiveHandles(); n != live {
		t.Fatalf("an idle breaker's Close left %d handles, want %d", n, live)
	}
	used := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	p := must(used.Allow())
	record(t, used, p, holdoff.Success, holdoff.Counted)
	used.Close()
	if n := holdoff.LiveHandles(); n != live+1 {
		t.Fatalf("a used breaker's Close left %d handles, want %d (freed by its finalizer)", n, live+1)
	}
	if _, err := used.Allow(); !errors.Is(err, holdoff.ErrClosed) {
		t.Fatalf("Allow after Close: %v", err)
	}
	used = nil
	for i := 0; i < 100 && holdoff.LiveHandles() != live; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := holdoff.LiveHandles(); n != live {
		t.Fatalf("%d handles alive once the breaker is unreachable, want %d", n, live)
	}
}

// Goroutines mix fast-path successes with failures, refusals and stale answers through the
// library on one breaker, in rounds a coordinator drives; after each step the books must be
// exactly what the step implies, whatever the interleaving.
//
// Each round: the workers make healthy calls, each keeping some permits open (all on the word,
// no library call); the coordinator records threshold-1 failures while the workers keep
// succeeding (the count is reset or not, as the order falls, but never reaches a trip); the
// coordinator records threshold-1 failures alone, then the workers answer half their open
// permits at once (failures pending: a success must reach the library, and the count is 0
// after); the coordinator trips the breaker (exactly one open); the workers answer the other
// half (all stale: their episode is over) and try to call (all refused); Reset closes it for
// the next round.
func TestStressFastPathAgainstLibrary(t *testing.T) {
	const workers, held, healthy, rounds, threshold = 4, 16, 200, 30, 4
	b, _ := fastBreaker(t, threshold)
	calls, stop := holdoff.CountLibraryCalls()
	defer stop()

	type step int
	const (
		stepHold    step = iota // healthy calls, keeping held permits open
		stepHealthy             // healthy calls only
		stepHalf                // answer half the open permits: counted
		stepStale               // answer the rest (stale) and try to call (refused)
	)
	var stale, refused, counted atomic.Int64
	work := func(s step, mine *[]*holdoff.Permit) {
		switch s {
		case stepHold, stepHealthy:
			for i := range healthy {
				p, err := b.Allow()
				if err != nil {
					t.Errorf("step %d: healthy call refused: %v", s, err)
					return
				}
				if s == stepHold && i < held {
					*mine = append(*mine, p)
					continue
				}
				if _, err := b.Record(p, holdoff.Success); err != nil {
					t.Errorf("step %d: %v", s, err)
				}
			}
		case stepHalf, stepStale:
			answer := *mine
			if s == stepHalf {
				answer, *mine = answer[:held/2], answer[held/2:]
			} else {
				*mine = nil
			}
			for _, p := range answer {
				e, err := b.Record(p, holdoff.Success)
				switch {
				case err != nil:
					t.Errorf("step %d: %v", s, err)
				case e == holdoff.Stale:
					stale.Add(1)
				case e == holdoff.Counted:
					counted.Add(1)
				}
			}
			if s == stepStale {
				for range held {
					if _, err := b.Allow(); errors.Is(err, holdoff.ErrBreakerOpen) {
						refused.Add(1)
					} else {
						t.Errorf("an open breaker admitted a call: %v", err)
					}
				}
			}
		}
	}
	// Workers run each step together; the coordinator waits for all of them.
	steps := make([]chan step, workers)
	var done sync.WaitGroup
	for w := range steps {
		steps[w] = make(chan step)
		go func() {
			var mine []*holdoff.Permit
			for s := range steps[w] {
				work(s, &mine)
				done.Done()
			}
		}()
	}
	defer func() {
		for _, c := range steps {
			close(c)
		}
	}()
	start := func(s step) {
		done.Add(workers)
		for _, c := range steps {
			c <- s
		}
	}
	fail := func(n int) {
		for range n {
			if _, err := b.Record(must(b.Allow()), holdoff.Failure); err != nil {
				t.Fatal(err)
			}
		}
	}
	expect := func(round int, what string, want holdoff.Snapshot) {
		t.Helper()
		s := b.Snapshot()
		if s.State != want.State || s.Failures != want.Failures || s.Opens != want.Opens ||
			s.StaleAnswers != want.StaleAnswers || s.Refusals != want.Refusals {
			t.Fatalf("round %d, %s: %+v, want state %v, failures %d, opens %d, stale %d, refusals %d",
				round, what, s, want.State, want.Failures, want.Opens, want.StaleAnswers, want.Refusals)
		}
	}

	runWithDeadline(t, func() {
		for r := range rounds {
			before := b.Snapshot()
			want := holdoff.Snapshot{State: holdoff.Closed, Opens: before.Opens, StaleAnswers: before.StaleAnswers,
				Refusals: before.Refusals}

			n0 := calls.Load()
			start(stepHold)
			done.Wait()
			if n := calls.Load() - n0; n != 0 {
				t.Fatalf("round %d: %d healthy calls reached the library, want 0", r, n)
			}
			expect(r, "healthy", want)

			// Fewer failures than the threshold among successes: never a trip.
			start(stepHealthy)
			fail(threshold - 1)
			done.Wait()
			want.Failures = b.Snapshot().Failures
			if want.Failures > threshold-1 {
				t.Fatalf("round %d: %d failures pending after %d", r, want.Failures, threshold-1)
			}
			expect(r, "failures among successes", want)
			start(stepHealthy)
			done.Wait()
			want.Failures = 0
			expect(r, "healthy after failures", want)

			// Pending failures, then successes at once: the count is forgotten, by the library.
			fail(threshold - 1)
			want.Failures = threshold - 1
			expect(r, "failures", want)
			n0 = calls.Load()
			start(stepHalf)
			done.Wait()
			if calls.Load() == n0 {
				t.Fatalf("round %d: failures pending, yet no success reached the library", r)
			}
			want.Failures = 0
			expect(r, "successes after failures", want)

			// The trip: exactly one open, every answer still held stale, every call refused.
			fail(threshold)
			want.State, want.Opens = holdoff.Open, want.Opens+1
			expect(r, "trip", want)
			start(stepStale)
			done.Wait()
			want.StaleAnswers += workers * held / 2
			want.Refusals += workers * held
			expect(r, "stale answers", want)

			b.Reset()
		}
	})
	if got, want := stale.Load(), int64(rounds*workers*held/2); got != want {
		t.Errorf("%d stale answers returned, want %d", got, want)
	}
	if got, want := counted.Load(), int64(rounds*workers*held/2); got != want {
		t.Errorf("%d counted answers returned, want %d", got, want)
	}
	if got, want := refused.Load(), int64(rounds*workers*held); got != want {
		t.Errorf("%d refusals, want %d", got, want)
	}
}

// settle runs the garbage collector until the count of live handles has stayed the same three
// times in a row: the cleanups of unreachable objects have run.
func settle() {
	for prev, same, i := holdoff.LiveHandles(), 0, 0; same < 3 && i < 100; i++ {
		runtime.GC()
		runtime.Gosched()
		if n := holdoff.LiveHandles(); n == prev {
			same++
		} else {
			prev, same = n, 0
		}
	}
}
