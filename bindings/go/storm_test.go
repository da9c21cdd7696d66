package holdoff_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

// A deadline storm, on the manual clock (run it under -race). The upstream refuses the first
// connection (it fell over), then accepts every request and never answers (it hangs). Twenty
// callers share one policy (trip after 1 failure, a constant 1 s open interval, no retries),
// each call's attempts bounded by WithAttemptTimeout(100 ms); caller i calls at i * 5 ms and
// then every 100 ms until 6 s (1201 calls), each from its own goroutine. The driver moves the
// clock in 5 ms steps: the attempts whose limit has passed end first (their contexts end with
// context.DeadlineExceeded), then the caller whose turn it is calls.
//
// A deadline is a timeout, a failure: the breaker opens, and each hanging probe re-opens it
// for another interval from its deadline. The upstream sees the tripping request at 0 and one
// probe per interval at 1000, 2100, 3200, 4300 and 5400 ms: 6 requests, at most the 7 a 1 s
// interval allows in 6 s, as the C binding's storm sees. The breaker ends open. Were a
// deadline counted as a cancellation, the breaker would stay half-open and probe every second.
func TestDeadlineStorm(t *testing.T) {
	const callers, step, limit, until = 20, 5 * time.Millisecond, 100 * time.Millisecond, 6 * time.Second
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultPolicyConfig()
	cfg.Breaker.Trip = holdoff.ConsecutiveFailures(1)
	cfg.Breaker.OpenInterval.Initial, cfg.Breaker.OpenInterval.Multiplier = time.Second, 1
	cfg.Budget.MaxRetries = 0
	p := must(holdoff.NewPolicy(cfg, holdoff.WithClock(clock), holdoff.WithAttemptTimeout(limit)))
	defer p.Close()

	type event struct {
		caller  int
		hanging bool // the upstream holds the caller's request; otherwise its call returned
		err     error
		outcome holdoff.Outcome // of the call's last attempt, if one was made
	}
	events := make(chan event, callers) // buffered: callers never block on a failed test
	var mu sync.Mutex
	var requests []time.Duration
	// upstream is caller i's operation: the first request is refused, the others hang until
	// their context ends.
	upstream := func(i int) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			requests = append(requests, clock.Now())
			first := len(requests) == 1
			mu.Unlock()
			if first {
				return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
			}
			events <- event{caller: i, hanging: true}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second): // a watchdog: the manual clock never ended it
				return errors.New("hung past the watchdog")
			}
		}
	}
	turns := make([]chan struct{}, callers)
	var wg sync.WaitGroup
	for i := range turns {
		turns[i] = make(chan struct{})
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for range turns[i] {
				var last holdoff.Outcome
				err := p.Do(context.Background(), upstream(i),
					holdoff.WithOnAttempt(func(a holdoff.AttemptInfo) { last = a.Outcome }))
				events <- event{caller: i, err: err, outcome: last}
			}
		}(i)
	}
	defer func() {
		for _, turn := range turns {
			close(turn)
		}
		wg.Wait()
	}()

	// next is the next caller's event; a watchdog turns a caller that never moves into an error.
	next := func(now time.Duration) (event, error) {
		select {
		case e := <-events:
			return e, nil
		case <-time.After(5 * time.Second):
			return event{}, fmt.Errorf("at %v: no caller moved", now)
		}
	}
	// drive moves the clock and the callers; it reports the first disorder.
	drive := func() error {
		var deadlines [callers]time.Duration // of each caller's hanging attempt; 0: none
		calls, refused, gaveUp, timeouts, maxInFlight := 0, 0, 0, 0, 0
		finish := func(e event) error {
			var open *holdoff.BreakerOpenError
			var gu *holdoff.GiveUpError
			switch {
			case errors.As(e.err, &open) && open.Attempts == 0:
				refused++
			case errors.As(e.err, &gu) && gu.Reason == holdoff.AttemptsExhausted && gu.Attempts == 1:
				gaveUp++
				if e.outcome == holdoff.Timeout {
					if !errors.Is(gu, context.DeadlineExceeded) {
						return fmt.Errorf("caller %d: a timed-out attempt's give-up unwraps to %v", e.caller, gu.Err)
					}
					timeouts++
				}
			default:
				return fmt.Errorf("caller %d: unexpected %v (last attempt %v)", e.caller, e.err, e.outcome.Kind)
			}
			return nil
		}
		for now := time.Duration(0); now <= until+limit; now += step {
			if err := clock.Set(now); err != nil {
				return err
			}
			// The attempts whose limit has passed have ended: their calls return, in any order.
			inFlight, ending := 0, map[int]bool{}
			for i, d := range deadlines {
				switch {
				case d == 0:
				case d > now:
					inFlight++
				default:
					ending[i] = true
				}
			}
			maxInFlight = max(maxInFlight, inFlight)
			for range len(ending) {
				e, err := next(now)
				if err != nil {
					return err
				}
				if !ending[e.caller] || e.hanging {
					return fmt.Errorf("at %v: expected the calls of %v to end, got %+v", now, ending, e)
				}
				delete(ending, e.caller)
				deadlines[e.caller] = 0
				if err := finish(e); err != nil {
					return err
				}
			}
			if now > until {
				continue
			}
			// Then the caller whose turn it is calls.
			i := int(now/step) % callers
			if deadlines[i] != 0 {
				return fmt.Errorf("at %v: caller %d is still waiting", now, i)
			}
			calls++
			turns[i] <- struct{}{} // every caller not hanging waits for its turn
			e, err := next(now)
			if err != nil {
				return err
			}
			switch {
			case e.caller != i:
				return fmt.Errorf("at %v: caller %d moved, expected %d", now, e.caller, i)
			case e.hanging:
				deadlines[i] = now + limit
			default:
				if err := finish(e); err != nil {
					return err
				}
			}
		}
		mu.Lock()
		got := fmt.Sprint(requests)
		mu.Unlock()
		if want := "[0s 1s 2.1s 3.2s 4.3s 5.4s]"; got != want {
			return fmt.Errorf("the upstream saw requests at %s, want %s (one probe per interval)", got, want)
		}
		if calls != 1201 || refused != calls-6 || gaveUp != 6 || timeouts != 5 || maxInFlight != 1 {
			return fmt.Errorf("calls %d, refused %d, gave up %d (timeouts %d), at most %d in flight", calls, refused,
				gaveUp, timeouts, maxInFlight)
		}
		s := p.Breaker().Snapshot()
		if s.State != holdoff.Open || s.Opens != 1 || s.Closes != 0 || s.Probes != 5 || s.ProbesInFlight != 0 ||
			s.Refusals != uint64(refused) {
			return fmt.Errorf("the breaker ends %+v, want open with 5 probes, none in flight", s)
		}
		return nil
	}
	runWithDeadline(t, func() {
		if err := drive(); err != nil {
			t.Error(err)
		}
	})
}
