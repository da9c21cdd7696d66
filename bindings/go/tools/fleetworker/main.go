// Command fleetworker is the Go worker of the multi-process fleet test (contract:
// conformance/fleet/README.md), run by bindings/go/run.sh test through
// `conformance/fleet/run.py go -- <this binary>`. It calls the upstream through one breaker
// shared with the other workers through the fleet, for RUN_MS, and writes its report to OUT.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	holdoff "holdoff.dev/go"
)

type report struct {
	Worker         string         `json:"worker"`
	CallsStarted   int            `json:"calls_started"`
	CallsEnded     int            `json:"calls_ended"`
	Allowed        int            `json:"allowed"`
	Refused        int            `json:"refused"`
	Errors         int            `json:"errors"`
	Statuses       map[string]int `json:"statuses"`
	SlowestMs      float64        `json:"slowest_breaker_call_ms"`
	RefusalStarts  []float64      `json:"refusal_starts"`
	breaker        *holdoff.Breaker
	client         *http.Client
	upstream, self string
}

// timed runs one breaker call, keeping the slowest.
func (r *report) timed(f func()) {
	t0 := time.Now()
	f()
	r.SlowestMs = max(r.SlowestMs, float64(time.Since(t0))/1e6)
}

func epochMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

// call makes one call; it reports whether the breaker refused it.
func (r *report) call(wasRefused bool) bool {
	var permit *holdoff.Permit
	var err error
	r.timed(func() { permit, err = r.breaker.Allow() })
	if errors.Is(err, holdoff.ErrBreakerOpen) {
		r.Refused++
		if !wasRefused {
			r.RefusalStarts = append(r.RefusalStarts, epochMs())
		}
		return true
	}
	if err != nil {
		panic(err)
	}
	r.Allowed++
	outcome := holdoff.Failure
	status := 0
	req, _ := http.NewRequest("GET", r.upstream+"/call", nil)
	req.Header.Set("X-Worker-Id", r.self)
	res, err := r.client.Do(req)
	if err != nil { // a transport error or timeout: a failure
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", r.self, err)
		r.Errors++
	} else {
		res.Body.Close()
		status = res.StatusCode
		r.Statuses[strconv.Itoa(status)]++
		switch status {
		case 200:
			outcome = holdoff.Success
		case 429:
			secs, perr := strconv.Atoi(res.Header.Get("Retry-After"))
			if perr != nil {
				secs = 1
			}
			outcome = holdoff.RetryLaterOutcome(time.Duration(secs) * time.Second)
		}
	}
	r.timed(func() { _, err = r.breaker.Record(permit, outcome) })
	if err != nil {
		panic(err)
	}
	if status == 200 {
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// iteration runs one call; a panic is counted as an error and the call still ends.
func (r *report) iteration(wasRefused bool) (refused bool) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "worker %s: %v\n", r.self, p)
			r.Errors++
			refused = false
		}
	}()
	return r.call(wasRefused)
}

func main() {
	runMs, err := strconv.Atoi(os.Getenv("RUN_MS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "RUN_MS:", err)
		os.Exit(2)
	}
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(1)
	cfg.OpenInterval = holdoff.Backoff{Initial: 500 * time.Millisecond, Multiplier: 1, Max: 500 * time.Millisecond}
	cfg.Recoveries = 2
	cfg.MaxProbesInFlight = 1
	cfg.Fleet = &holdoff.FleetConfig{URL: os.Getenv("HOLDOFF_FLEET_URL"), Key: os.Getenv("HOLDOFF_FLEET_KEY"),
		Refresh: 20 * time.Millisecond}
	breaker, err := holdoff.NewBreaker(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "breaker:", err)
		os.Exit(2)
	}
	r := &report{Worker: os.Getenv("WORKER_ID"), Statuses: map[string]int{}, RefusalStarts: []float64{},
		breaker: breaker, client: &http.Client{Timeout: 2 * time.Second}, upstream: os.Getenv("UPSTREAM_URL"),
		self: os.Getenv("WORKER_ID")}
	end := time.Now().Add(time.Duration(runMs) * time.Millisecond)
	refused := false
	for time.Now().Before(end) {
		r.CallsStarted++
		refused = r.iteration(refused)
		r.CallsEnded++
		if refused {
			time.Sleep(5 * time.Millisecond)
		}
	}
	breaker.Close() // joins the fleet's background thread and closes its sockets
	out, _ := json.Marshal(r)
	if err := os.WriteFile(os.Getenv("OUT"), out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "OUT:", err)
		os.Exit(2)
	}
}
