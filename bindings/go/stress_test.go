package holdoff_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

// The stress tests, run under -race by run.sh. Each has a deadline: a deadlock fails
// the test (with every goroutine's stack from the test binary's own timeout if it hangs hard)
// instead of hanging CI.
const stressDeadline = 20 * time.Second

// runWithDeadline runs f and fails the test if it does not return before stressDeadline.
func runWithDeadline(t *testing.T, f func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stressDeadline)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("no progress within %v: deadlock?", stressDeadline)
	}
}

// stressUpstream is the scripted upstream of the C stress test (bindings/c/tests/stress_test.c):
// by round r (one second of manual time) and global call number n.
//
//	r%16 in 0..3   flaky: n%7 == 0 fails (a timeout if n is odd), n%499 == 400 asks to retry in 1.5 s
//	r%16 in 4..5   outage: every call fails (the breaker must trip)
//	r%16 in 6..15  healthy: every call succeeds (the breaker must recover)
func stressUpstream(n uint64, r int) holdoff.Outcome {
	switch phase := r % 16; {
	case phase >= 6:
		return holdoff.Success
	case phase >= 4:
		return holdoff.Failure
	case n%499 == 400:
		return holdoff.RetryLaterOutcome(1500 * time.Millisecond)
	case n%7 == 0 && n%2 == 1:
		return holdoff.Timeout
	case n%7 == 0:
		return holdoff.Failure
	}
	return holdoff.Success
}

type stressCounts struct {
	attempts, admitted, refused, recorded, cancelled, probes   uint64
	spent, refunded, quotaEmpty, doubleRefused, sharedReturned uint64
	evOpened, evRecovered                                      uint64
	effects                                                    [3]uint64
}

func (c *stressCounts) add(o *stressCounts) {
	c.attempts += o.attempts
	c.admitted += o.admitted
	c.refused += o.refused
	c.recorded += o.recorded
	c.cancelled += o.cancelled
	c.probes += o.probes
	c.spent += o.spent
	c.refunded += o.refunded
	c.quotaEmpty += o.quotaEmpty
	c.doubleRefused += o.doubleRefused
	c.sharedReturned += o.sharedReturned
	c.evOpened += o.evOpened
	c.evRecovered += o.evRecovered
	for i := range c.effects {
		c.effects[i] += o.effects[i]
	}
}

func (c *stressCounts) events(evs []holdoff.StateChange) {
	for _, e := range evs {
		// A trip (or retry-later) from closed is what the breaker counts as an open.
		if e.From == holdoff.Closed && e.To == holdoff.Open {
			c.evOpened++
		} else if e.Reason.String() == "recovered" { // the package exports no Reason constants
			c.evRecovered++
		}
	}
}

// Goroutines share ONE breaker and ONE retry quota for a bounded number of calls against the
// scripted upstream; only a coordinator moves the manual clock, between rounds. The
// interleaving varies from run to run; the accounting must add up exactly in every run.
// Workers also drain the breaker's events while the others call (the binding has no callbacks:
// events are polled), and every goroutine tries to give back one shared lease.
func TestStressSharedBreakerAndQuota(t *testing.T) {
	const workers, rounds, callsPerRound, capacity = 8, 48, 25, 60
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(5)
	cfg.OpenInterval = holdoff.Backoff{Initial: 2 * time.Second, Multiplier: 1, Max: 2 * time.Second}
	cfg.Recoveries = 3
	b := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	defer b.Close()
	q := must(holdoff.NewRetryQuota(holdoff.QuotaConfig{Capacity: capacity, RetryCost: 5, TimeoutCost: 10, SuccessRefill: 1}))
	defer q.Close()
	shared := q.Acquire(false)
	if !shared.Acquired() {
		t.Fatal("the shared lease must be acquired")
	}

	var upstreamCalls atomic.Uint64
	var unexpected sync.Map // error text -> count, for the report
	var nUnexpected atomic.Int64
	fail := func(what string, err error) {
		nUnexpected.Add(1)
		unexpected.Store(fmt.Sprintf("%s: %v", what, err), true)
	}
	counts := make([]stressCounts, workers)

	// attempt makes one call through the breaker and returns the outcome recorded (ok false if
	// refused).
	attempt := func(c *stressCounts, r, k int) (holdoff.Outcome, bool) {
		c.attempts++
		p, err := b.Allow()
		if err != nil {
			if errors.Is(err, holdoff.ErrBreakerOpen) {
				c.refused++
			} else {
				fail("Allow", err)
			}
			return holdoff.Outcome{}, false
		}
		c.admitted++
		if p.IsProbe() {
			c.probes++
		}
		n := upstreamCalls.Add(1) - 1
		o := stressUpstream(n, r)
		if n%11 == 5 {
			o = holdoff.Cancelled // the caller gave up on it
		}
		eff, err := b.Record(p, o)
		if err != nil {
			fail("Record", err)
			return holdoff.Outcome{}, false
		}
		c.effects[eff]++
		if o.Kind == holdoff.KindCancelled {
			c.cancelled++
		} else {
			c.recorded++
		}
		if k%17 == 0 { // a second record of the same permit never counts
			if _, err := b.Record(p, holdoff.Success); errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
				c.doubleRefused++
			} else {
				fail("second Record", err)
			}
		}
		return o, true
	}
	call := func(c *stressCounts, r, k int) {
		o, ok := attempt(c, r, k)
		if !ok || (o.Kind != holdoff.KindFailure && o.Kind != holdoff.KindTimeout) {
			return
		}
		lease := q.Acquire(o.Kind == holdoff.KindTimeout) // one retry, paid from the quota
		if lease.Available() > capacity {
			fail("Acquire", fmt.Errorf("available %d > capacity", lease.Available()))
		}
		if !lease.Acquired() {
			c.quotaEmpty++
			return
		}
		c.spent += lease.Cost()
		if o2, ok := attempt(c, r, k+1); !ok || o2.Kind != holdoff.KindSuccess {
			return // the tokens stay spent
		}
		if err := q.OnSuccess(lease); err != nil {
			fail("OnSuccess", err)
			return
		}
		c.refunded += lease.Cost()
		if k%13 == 0 { // a lease given back twice refunds nothing
			if err := q.OnSuccess(lease); errors.Is(err, holdoff.ErrPermitAlreadyRecorded) {
				c.doubleRefused++
			} else {
				fail("second OnSuccess", err)
			}
		}
	}

	runWithDeadline(t, func() {
		start := make([]chan int, workers)
		var roundDone, finished sync.WaitGroup
		for w := range workers {
			start[w] = make(chan int)
			finished.Add(1)
			go func(c *stressCounts, start <-chan int) {
				defer finished.Done()
				for r := range start {
					for k := 0; k < callsPerRound; k++ {
						call(c, r, k)
						if k%8 == 7 {
							c.events(b.DrainEvents())
						}
					}
					roundDone.Done()
				}
				switch err := q.OnSuccess(shared); {
				case err == nil:
					c.sharedReturned++
				case !errors.Is(err, holdoff.ErrPermitAlreadyRecorded):
					fail("shared lease", err)
				}
			}(&counts[w], start[w])
		}
		for r := 0; r < rounds; r++ {
			roundDone.Add(workers)
			for w := range workers {
				start[w] <- r
			}
			roundDone.Wait()
			if err := clock.Advance(time.Second); err != nil {
				fail("Advance", err)
			}
		}
		for w := range workers {
			close(start[w])
		}
		finished.Wait()
	})

	var sum stressCounts
	for i := range counts {
		sum.add(&counts[i])
	}
	sum.events(b.DrainEvents())
	s := b.Snapshot()
	available := q.Available()
	t.Logf("%d goroutines x %d rounds x %d calls: attempts %d (admitted %d, refused %d), recorded %d, "+
		"cancelled %d, probes %d, opens %d, closes %d, quota spent %d refunded %d empty %d, available %d",
		workers, rounds, callsPerRound, sum.attempts, sum.admitted, sum.refused, sum.recorded, sum.cancelled,
		sum.probes, s.Opens, s.Closes, sum.spent, sum.refunded, sum.quotaEmpty, available)

	unexpected.Range(func(k, _ any) bool { t.Errorf("unexpected error: %v", k); return true })
	eq := func(what string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	eq("unexpected errors", uint64(nUnexpected.Load()), 0)
	// Admission accounting.
	eq("attempts", sum.attempts, sum.admitted+sum.refused)
	eq("breaker's refusals", s.Refusals, sum.refused)
	eq("admitted", sum.admitted, sum.recorded+sum.cancelled)
	eq("ignored effects", sum.effects[holdoff.Ignored], sum.cancelled)
	eq("counted+stale effects", sum.effects[holdoff.Counted]+sum.effects[holdoff.Stale], sum.recorded)
	eq("probes", s.Probes, sum.probes)
	eq("probes in flight", uint64(s.ProbesInFlight), 0)
	// Events: none lost, and they agree with the counters.
	eq("events dropped", s.EventsDropped, 0)
	eq("opens", s.Opens, sum.evOpened)
	eq("episodes", uint64(s.Episode), s.Opens)
	eq("closes", s.Closes, sum.evRecovered)
	if s.Opens < rounds/16 || s.Closes < rounds/16 || s.State != holdoff.Closed || sum.refused == 0 {
		t.Errorf("the script must trip and recover the breaker each cycle: %+v", s)
	}
	// Quota: every token taken is still spent or refunded exactly once.
	eq("shared lease returned", sum.sharedReturned, 1)
	spent, refunded := sum.spent+shared.Cost(), sum.refunded+shared.Cost()
	eq("quota available", available, capacity-spent+refunded)
	if refunded > spent || available > capacity {
		t.Errorf("quota out of bounds: spent %d refunded %d available %d", spent, refunded, available)
	}
	if sum.doubleRefused == 0 {
		t.Error("no double record was tried")
	}
}

// The objects TestCloseRacesWithUse closes while they are in use.
const (
	raceBreaker = iota
	raceQuota
	racePolicy
	raceClock
	raceObjects
)

var raceNames = [raceObjects]string{"breaker", "quota", "policy", "clock"}

// Close racing with use, under -race: goroutines keep calling a breaker, a quota, a policy and
// a manual clock while two goroutines Close each of them at once. Every call either completes
// on the live handle or reports ErrClosed (methods without an error result panic with it);
// nothing else, no data race, no use of a freed C handle (the debug C library would report
// one as an internal error), and every handle is freed in the end (TestMain checks it).
//
// The race is exercised in every run, not left to the scheduler: the closers wait until every
// object has completed `gate` calls on its live handle, and the users go on past `iterations`
// until every object has reported ErrClosed (at most maxIterations, so a binding that never
// reports it fails instead of hanging). Both counts are asserted per object.
func TestCloseRacesWithUse(t *testing.T) {
	const users, iterations, maxIterations, gate = 6, 300, 20000, 25
	for round := 0; round < 5; round++ {
		clock := manualClock(t)
		b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
		q := must(holdoff.NewRetryQuota(holdoff.DefaultQuotaConfig()))
		pol := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock),
			holdoff.WithSleeper(func(context.Context, time.Duration) error { return nil })))
		var bad atomic.Int64
		report := func(what string, err error) {
			if bad.Add(1) <= 5 {
				t.Errorf("%s: unexpected %v", what, err)
			}
		}
		// Per object: calls completed on the live handle, and calls that reported ErrClosed.
		var live, closed [raceObjects]atomic.Int64
		gateOpen := make(chan struct{}) // closed once every object has `gate` live calls
		var openGate sync.Once
		counted := func(obj int) {
			if live[obj].Add(1) > gate {
				return
			}
			for i := range live {
				if live[i].Load() < gate {
					return
				}
			}
			openGate.Do(func() { close(gateOpen) })
		}
		allClosed := func() bool {
			for i := range closed {
				if closed[i].Load() == 0 {
					return false
				}
			}
			return true
		}
		// result counts err against obj; the allowed errors (a refusal) count as neither.
		result := func(obj int, what string, err error, allowed ...error) {
			switch {
			case err == nil:
				counted(obj)
			case errors.Is(err, holdoff.ErrClosed):
				closed[obj].Add(1)
			default:
				for _, a := range allowed {
					if errors.Is(err, a) {
						return
					}
				}
				report(what, err)
			}
		}
		// A method without an error result may panic with ErrClosed, and with nothing else.
		panicking := func(obj int, what string, f func()) {
			defer func() {
				switch r := recover(); {
				case r == nil:
					counted(obj)
				default:
					if err, ok := r.(error); ok && errors.Is(err, holdoff.ErrClosed) {
						closed[obj].Add(1)
					} else {
						report(what, fmt.Errorf("panic %v", r))
					}
				}
			}()
			f()
		}
		var start sync.WaitGroup
		start.Add(1)
		runWithDeadline(t, func() {
			var userWG, closerWG sync.WaitGroup
			usersDone := make(chan struct{})
			for u := 0; u < users; u++ {
				userWG.Add(1)
				go func(u int) {
					defer userWG.Done()
					start.Wait()
					for i := 0; i < maxIterations && (i < iterations || !allClosed()); i++ {
						switch (u + i) % 6 {
						case 0:
							p, err := b.Allow()
							result(raceBreaker, "Allow", err, holdoff.ErrBreakerOpen)
							if err == nil {
								_, err := b.Record(p, holdoff.Success)
								result(raceBreaker, "Record", err)
							}
						case 1:
							err := b.Do(context.Background(), func(context.Context) error { return nil })
							result(raceBreaker, "Do", err, holdoff.ErrBreakerOpen)
						case 2:
							var l *holdoff.QuotaLease
							panicking(raceQuota, "Acquire", func() { l = q.Acquire(false) })
							if l != nil && l.Acquired() {
								result(raceQuota, "OnSuccess", q.OnSuccess(l))
							}
						case 3:
							err := pol.Do(context.Background(), func(context.Context) error { return nil })
							result(racePolicy, "Policy.Do", err)
						case 4:
							panicking(raceBreaker, "Snapshot", func() { _ = b.Snapshot(); _ = b.DrainEvents() })
						case 5:
							result(raceClock, "Advance", clock.Advance(time.Millisecond))
						}
					}
				}(u)
			}
			go func() {
				userWG.Wait()
				close(usersDone)
			}()
			for c := 0; c < 2; c++ { // two closers at once: double Close is a no-op
				closerWG.Add(1)
				go func() {
					defer closerWG.Done()
					select {
					case <-gateOpen:
					case <-usersDone: // the gate never opened: the counts below report it
					}
					for _, x := range []interface{ Close() error }{pol, b, q, clock} {
						if err := x.Close(); err != nil {
							report("Close", err)
						}
					}
				}()
			}
			start.Done()
			userWG.Wait()
			closerWG.Wait()
		})
		for i := range live {
			l, c := live[i].Load(), closed[i].Load()
			if l == 0 || c == 0 {
				t.Errorf("round %d, %s: %d calls on the live handle, %d reported closed: want both > 0",
					round, raceNames[i], l, c)
			}
		}
		if round == 0 {
			t.Logf("round 0 (live/closed): breaker %d/%d, quota %d/%d, policy %d/%d, clock %d/%d",
				live[raceBreaker].Load(), closed[raceBreaker].Load(), live[raceQuota].Load(), closed[raceQuota].Load(),
				live[racePolicy].Load(), closed[racePolicy].Load(), live[raceClock].Load(), closed[raceClock].Load())
		}
		// After Close every method reports it.
		if _, err := b.Allow(); !errors.Is(err, holdoff.ErrClosed) {
			t.Errorf("Allow after Close: %v", err)
		}
		if err := q.OnSuccess(nil); !errors.Is(err, holdoff.ErrClosed) {
			t.Errorf("OnSuccess after Close: %v", err)
		}
		if err := pol.Do(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, holdoff.ErrClosed) {
			t.Errorf("Policy.Do after Close: %v", err)
		}
		if err := clock.Set(time.Hour); !errors.Is(err, holdoff.ErrClosed) {
			t.Errorf("Set after Close: %v", err)
		}
		if t.Failed() {
			return
		}
	}
}
