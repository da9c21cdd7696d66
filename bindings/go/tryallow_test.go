package holdoff_test

import (
	"errors"
	"sync"
	"testing"

	"holdoff.dev/go"
)

// A permit from TryAllow belongs to its breaker: another breaker refuses to record it (and
// its books do not move), its own records it once, and a refused TryAllow's zero permit
// records nothing anywhere.
func TestTryAllowPermitIsRecordedOnlyOnItsBreaker(t *testing.T) {
	a, _ := fastBreaker(t, 1)
	b, _ := fastBreaker(t, 1)
	p, ok := a.TryAllow()
	if !ok {
		t.Fatal("a closed breaker refused")
	}
	for _, o := range []holdoff.Outcome{holdoff.Success, holdoff.Failure} {
		if e, err := b.Record(&p, o); !errors.Is(err, holdoff.ErrForeignPermit) {
			t.Fatalf("Record(%v) on another breaker: %v, %v; want ErrForeignPermit", o.Kind, e, err)
		}
	}
	if s := b.Snapshot(); s.State != holdoff.Closed || s.Failures != 0 || s.Opens != 0 {
		t.Fatalf("a foreign permit moved the other breaker: %+v", s)
	}
	record(t, a, &p, holdoff.Success, holdoff.Counted)
	if _, err := a.Record(&p, holdoff.Failure); !errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
		t.Fatalf("a failure after the success: %v, want ErrPermitAlreadyRecorded", err)
	}
	if s := a.Snapshot(); s.State != holdoff.Closed || s.Failures != 0 {
		t.Fatalf("a second record of one permit counted: %+v", s)
	}

	// Refused: the zero permit is no permit of either breaker.
	record(t, a, must(a.Allow()), holdoff.Failure, holdoff.Counted)
	z, ok := a.TryAllow()
	if ok || z != (holdoff.Permit{}) {
		t.Fatalf("TryAllow on an open breaker: %v, %+v", ok, z)
	}
	for _, br := range []*holdoff.Breaker{a, b} {
		if e, err := br.Record(&z, holdoff.Success); err == nil {
			t.Fatalf("a refusal's zero permit was recorded: %v", e)
		}
	}
	if s := a.Snapshot(); s.State != holdoff.Open || s.Opens != 1 {
		t.Fatalf("the zero permit moved the open breaker: %+v", s)
	}
	if s := b.Snapshot(); s.State != holdoff.Closed || s.Failures != 0 {
		t.Fatalf("the zero permit moved the closed breaker: %+v", s)
	}
}

// Close racing goroutines in TryAllow and Record (run under -race): every TryAllow either
// admits (and its Record counts, or says ErrClosed once Close has run) or returns false with
// Err matching ErrClosed; the breaker only ever sees successes, so it never refuses.
func TestTryAllowRacesClose(t *testing.T) {
	const workers, rounds = 4, 20
	for range rounds {
		b, _ := fastBreaker(t, 1)
		var started, done sync.WaitGroup
		started.Add(workers)
		errs := make(chan error, workers)
		for range workers {
			done.Add(1)
			go func() {
				defer done.Done()
				for i := 0; ; i++ {
					if i == 10 {
						started.Done()
					}
					p, ok := b.TryAllow()
					if !ok {
						if err := b.Err(); !errors.Is(err, holdoff.ErrClosed) {
							errs <- err
						}
						if i < 10 {
							started.Done()
						}
						return
					}
					if e, err := b.Record(&p, holdoff.Success); (err != nil || e != holdoff.Counted) && !errors.Is(err, holdoff.ErrClosed) {
						errs <- err
						if i < 10 {
							started.Done()
						}
						return
					}
				}
			}()
		}
		started.Wait()
		b.Close()
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a call racing Close: %v", err)
		}
		if err := b.Err(); !errors.Is(err, holdoff.ErrClosed) {
			t.Fatalf("Err after Close: %v", err)
		}
	}
}
