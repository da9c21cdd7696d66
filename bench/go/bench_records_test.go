package bench_test

// The cross-language benchmark (bench/go/run.sh): holdoff next to sony/gobreaker and failsafe-go,
// in the same run, the same operations. It runs only when HOLDOFF_BENCH_RUN=1 (so that
// `go test` skips it); with HOLDOFF_BENCH_OUT=<file> it also appends one JSON line per
// (subject, op) in the record format of docs/performance.md.
//
// Each sample is one timed batch sized to ~50 ms (ns/op = batch wall time / batch size), 5
// samples after a calibration batch. Memory: RSS after debug.FreeOSMemory, before and after
// creating 100k objects, in a fresh child process per sample (RSS covers the Go heap and the
// Rust library's C heap alike; a fresh process because neither heap hands freed pages back
// at once). Allocations: testing.AllocsPerRun (Go heap only: the Rust side is measured in C).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bench "example.invalid/holdoff/bench/go"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"
	holdoff "holdoff.dev/go"
)

const (
	benchSamples = 5
	benchTarget  = 50 * time.Millisecond
	memObjects   = 100_000
)

var (
	gobreakerVersion = "gobreaker v2.4.0"
	failsafeVersion  = "failsafe-go v0.9.8"
)

type record struct {
	Lang    string    `json:"lang"`
	Subject string    `json:"subject"`
	Op      string    `json:"op"`
	Unit    string    `json:"unit"`
	Samples []float64 `json:"samples"`
	Note    string    `json:"note"`
}

type recorder struct {
	t   *testing.T
	out *os.File
}

func (r *recorder) emit(subject, op, unit string, samples []float64, note string) {
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	fmt.Printf("%-14s %-24s %10.1f %-9s (min %.1f, max %.1f)  %s\n", subject, op, s[len(s)/2], unit, s[0], s[len(s)-1], note)
	if r.out == nil {
		return
	}
	line, err := json.Marshal(record{"go", subject, op, unit, samples, note})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.out.Write(append(line, '\n')); err != nil {
		r.t.Fatal(err)
	}
}

// batch runs n operations.
type batch func(n int)

// timed is the wall time of `threads` goroutines each running n operations, divided by n.
func timed(f batch, n, threads int) float64 {
	if threads == 1 {
		t0 := time.Now()
		f(n)
		return float64(time.Since(t0).Nanoseconds()) / float64(n)
	}
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(threads)
	done.Add(threads)
	for range threads {
		go func() {
			ready.Done()
			<-start
			f(n)
			done.Done()
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

func (r *recorder) measure(subject, op string, threads int, note string, f batch) {
	n := 1000
	per := timed(f, n, threads)
	for per*float64(n) < float64(benchTarget)/10 {
		n *= 4
		per = timed(f, n, threads)
	}
	n = int(float64(benchTarget)/per) + 1
	s := make([]float64, benchSamples)
	for i := range s {
		s[i] = timed(f, n, threads)
	}
	r.emit(subject, op, "ns/op", s, note)
}

func benchMust[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// -- holdoff ----------------------------------------------------------------------------------

// Not inlined into TestBenchRecords: in a function that large the compiler inlines only tiny
// calls, so Allow would not be inlined in the loop and its permit would escape to the heap,
// which is not what a caller's ordinary loop gets.
//
//go:noinline
func holdoffAllowRecord(b *holdoff.Breaker) batch {
	return func(n int) {
		for range n {
			p, err := b.Allow()
			if err != nil {
				panic(err)
			}
			b.Record(p, holdoff.Success)
		}
	}
}

// holdoffRefuse is TryAllow's refusal, in a function of its own so that TryAllow is inlined
// into the loop, as in a caller's ordinary code (see holdoffAllowRecord).
//
//go:noinline
func holdoffRefuse(b *holdoff.Breaker) batch {
	return func(n int) {
		for range n {
			if _, ok := b.TryAllow(); ok {
				panic("admitted")
			}
		}
	}
}

// tripHoldoff opens b the way its peers are opened here: by consecutive failures (the default
// trip policy's 5), so that it waits for its probe, with a RetryAfter to compute.
func tripHoldoff(b *holdoff.Breaker) {
	for range 5 {
		p := benchMust(b.Allow())
		benchMust(b.Record(p, holdoff.Failure))
	}
	if s := b.Snapshot(); s.State != holdoff.Open || !s.HasRetryAfter {
		panic(fmt.Sprintf("not tripped: %+v", s))
	}
}

// -- sony/gobreaker ---------------------------------------------------------------------------

func gobreakerAllowRecord(cb *gobreaker.TwoStepCircuitBreaker[struct{}]) batch {
	return func(n int) {
		for range n {
			done, err := cb.Allow()
			if err != nil {
				panic(err)
			}
			done(nil)
		}
	}
}

// -- failsafe-go ------------------------------------------------------------------------------

func failsafeAllowRecord(cb circuitbreaker.CircuitBreaker[any]) batch {
	return func(n int) {
		for range n {
			if !cb.TryAcquirePermit() {
				panic("refused")
			}
			cb.RecordSuccess()
		}
	}
}

func newFailsafe() circuitbreaker.CircuitBreaker[any] {
	return circuitbreaker.NewBuilder[any]().WithFailureThreshold(5).WithDelay(30 * time.Second).Build()
}

func TestBenchRecords(t *testing.T) {
	if os.Getenv("HOLDOFF_BENCH_RUN") != "1" {
		t.Skip("benchmark: bench/go/run.sh sets HOLDOFF_BENCH_RUN=1")
	}
	r := &recorder{t: t}
	if path := os.Getenv("HOLDOFF_BENCH_OUT"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r.out = f
	}
	fmt.Printf("holdoff %s via cgo (release library), %s, %d samples of ~%v each; median (min, max)\n",
		holdoff.Version(), runtime.Version(), benchSamples, benchTarget)
	ctx := context.Background()
	nilFn := func(context.Context) error { return nil }

	// The floor under every call that crosses into the library: one no-op cgo call and back.
	r.measure("floor", "noop_crossing", 1, "one cgo call of holdoff_abi_version() (returns a constant), Go -> C -> Go", func(n int) {
		for range n {
			bench.CgoFloor()
		}
	})

	// allow+record, 1 and 2 goroutines.
	hb := benchMust(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	defer hb.Close()
	gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
	fb := newFailsafe()
	for _, threads := range []int{1, 2} {
		op, suffix := "allow_record", ""
		if threads == 2 {
			op, suffix = "allow_record_2t", "; 2 goroutines sharing one breaker, wall ns / ops per goroutine"
		}
		r.measure("holdoff", op, threads, "b.Allow() + b.Record(p, holdoff.Success), closed, defaults: both on the fast-path word, no cgo call, the permit on the caller's stack"+suffix, holdoffAllowRecord(hb))
		r.measure("sony/gobreaker", op, threads, "TwoStepCircuitBreaker.Allow() + done(nil), "+gobreakerVersion+suffix, gobreakerAllowRecord(gb))
		r.measure("failsafe-go", op, threads, "cb.TryAcquirePermit() + cb.RecordSuccess(), "+failsafeVersion+suffix, failsafeAllowRecord(fb))
	}

	// One refusal on an open breaker.
	// Tripped by failures, as the peers are (not forced open): open for 30 s, waiting for its
	// probe, so each refusal reads the clock for its RetryAfter.
	ho := benchMust(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	defer ho.Close()
	tripHoldoff(ho)
	r.measure("holdoff", "refuse_open", 1, "b.TryAllow() -> false (tripped by 5 failures, open 30 s, waiting for its probe): refused in place on the refusal block, no cgo call, no allocation: one monotonic clock reading and the refusal's count (b.Allow()'s refusal adds its *BreakerOpenError: BenchmarkHoldoffRefuse)", holdoffRefuse(ho))
	gbo := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "open", Timeout: time.Hour})
	for range 6 { // the default ReadyToTrip: more than 5 consecutive failures
		done, _ := gbo.Allow()
		done(errors.New("boom"))
	}
	r.measure("sony/gobreaker", "refuse_open", 1, "TwoStepCircuitBreaker.Allow() -> ErrOpenState, "+gobreakerVersion, func(n int) {
		for range n {
			if _, err := gbo.Allow(); err == nil {
				panic("admitted")
			}
		}
	})
	fbo := newFailsafe()
	fbo.Open()
	r.measure("failsafe-go", "refuse_open", 1, "cb.TryAcquirePermit() -> false (opened), "+failsafeVersion, func(n int) {
		for range n {
			if fbo.TryAcquirePermit() {
				panic("admitted")
			}
		}
	})

	// A retry-budget decision for a 429 with Retry-After: 1.
	budget := benchMust(holdoff.NewRetryBudget(holdoff.DefaultBudgetConfig()))
	defer budget.Close()
	retryLater := holdoff.RetryLaterOutcome(time.Second)
	r.measure("holdoff", "budget_429", 1, "NewRetryState() + budget.Decide(s, RetryLaterOutcome(1s)) + s.Close()", func(n int) {
		for range n {
			s := holdoff.NewRetryState()
			d, err := budget.Decide(s, retryLater)
			if err != nil || d.Kind != holdoff.Retry {
				panic(fmt.Sprint(d, err))
			}
			s.Close()
		}
	})

	// A trivial successful function through the idiomatic helper: the breaker's own, as the
	// peers are breakers (Policy.Do adds the retry budget's per-call state).
	pcb := benchMust(holdoff.NewBreaker(holdoff.DefaultBreakerConfig()))
	defer pcb.Close()
	r.measure("holdoff", "protected_call", 1, "breaker.Do(ctx, fn) (defaults): admission and success on the fast-path word, no cgo call", func(n int) {
		for range n {
			if err := pcb.Do(ctx, nilFn); err != nil {
				panic(err)
			}
		}
	})
	ge := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
	geFn := func() (struct{}, error) { return struct{}{}, nil }
	r.measure("sony/gobreaker", "protected_call", 1, "cb.Execute(fn), "+gobreakerVersion, func(n int) {
		for range n {
			if _, err := ge.Execute(geFn); err != nil {
				panic(err)
			}
		}
	})
	fe := failsafe.With[any](newFailsafe())
	feFn := func() error { return nil }
	r.measure("failsafe-go", "protected_call", 1, "failsafe.With[any](cb).Run(fn), "+failsafeVersion, func(n int) {
		for range n {
			if err := fe.Run(feFn); err != nil {
				panic(err)
			}
		}
	})

	// Group lookups of an existing key.
	for _, g := range []struct {
		op   string
		keys int
	}{{"group_lookup_10", 10}, {"group_lookup_10k", 10_000}, {"group_lookup_1m", 1_000_000}} {
		// Bounded to hold every key, so that lookups find them (no eviction).
		group := benchMust(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithMaxKeys(g.keys)))
		keys := make([]string, g.keys)
		for i := range keys {
			keys[i] = "host-" + strconv.Itoa(i)
			benchMust(group.Get(keys[i])).Close()
		}
		r.measure("holdoff", g.op, 1, fmt.Sprintf("group.Get(existing key) + Close of the breaker it returns (a handle per lookup), %d keys, scattered order", g.keys), func(n int) {
			k := 0
			for range n {
				k = (k + 7919) % len(keys)
				b, err := group.Get(keys[k])
				if err != nil {
					panic(err)
				}
				b.Close()
			}
		})
		group.Close()
	}

	// Allocations per allow+record (Go heap).
	allocs := func(subject, note string, f func()) {
		s := make([]float64, benchSamples)
		for i := range s {
			s[i] = testing.AllocsPerRun(10_000, f)
		}
		r.emit(subject, "allocs_per_allow_record", "allocs/op", s, note)
	}
	allocs("holdoff", "testing.AllocsPerRun, Go heap only (the Rust side allocates nothing here: see the C figure)", func() {
		p, _ := hb.Allow()
		hb.Record(p, holdoff.Success)
	})
	allocs("sony/gobreaker", "testing.AllocsPerRun over Allow() + done(nil), "+gobreakerVersion, func() {
		done, _ := gb.Allow()
		done(nil)
	})
	allocs("failsafe-go", "testing.AllocsPerRun over TryAcquirePermit() + RecordSuccess(), "+failsafeVersion, func() {
		fb.TryAcquirePermit()
		fb.RecordSuccess()
	})

	// Memory, in child processes (see the top of the file).
	for _, m := range []struct{ subject, op, kind, note string }{
		{"holdoff", "bytes_per_breaker", "holdoff", "NewBreaker(defaults): the wrapper (24 bytes and a finalizer), the handle and the core's breaker; breakers made without WithClock share one system clock"},
		{"sony/gobreaker", "bytes_per_breaker", "gobreaker", "NewCircuitBreaker, " + gobreakerVersion},
		{"failsafe-go", "bytes_per_breaker", "failsafe", "NewBuilder().WithFailureThreshold(5).Build(), " + failsafeVersion},
		{"holdoff", "bytes_per_group_entry", "group", "group.Get(\"host-N\") of 100k new keys, each breaker kept (wrapper + handle + core entry)"},
	} {
		s := make([]float64, benchSamples)
		for i := range s {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBenchMemChild$")
			cmd.Env = append(os.Environ(), "HOLDOFF_BENCH_MEM="+m.kind)
			outp, err := cmd.Output()
			if err != nil {
				t.Fatalf("memory child %s: %v", m.kind, err)
			}
			line := ""
			for _, l := range strings.Split(string(outp), "\n") {
				if strings.HasPrefix(l, "bytes=") {
					line = strings.TrimPrefix(l, "bytes=")
				}
			}
			if s[i], err = strconv.ParseFloat(line, 64); err != nil {
				t.Fatalf("memory child %s: %q", m.kind, outp)
			}
		}
		r.emit(m.subject, m.op, "bytes", s, "RSS delta over 100k objects after debug.FreeOSMemory, fresh process per sample: "+m.note)
	}
}

func rssBytes() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize())
}

// TestBenchMemChild is the child of the memory measurement: it prints bytes=<per object>.
func TestBenchMemChild(t *testing.T) {
	kind := os.Getenv("HOLDOFF_BENCH_MEM")
	if kind == "" {
		t.Skip("benchmark child process")
	}
	keep := make([]any, memObjects)
	var group *holdoff.BreakerGroup
	var keys []string
	if kind == "group" {
		group = benchMust(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithMaxKeys(memObjects)))
		keys = make([]string, memObjects)
		for i := range keys {
			keys[i] = "host-" + strconv.Itoa(i)
		}
	}
	// Create the types' one-off state (the package's, the runtime's) before the first reading.
	newOne := map[string]func(i int) any{
		"holdoff":   func(int) any { return benchMust(holdoff.NewBreaker(holdoff.DefaultBreakerConfig())) },
		"gobreaker": func(int) any { return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "m"}) },
		"failsafe":  func(int) any { return newFailsafe() },
		"group":     func(i int) any { return benchMust(group.Get(keys[i])) },
	}[kind]
	warm := newOne(0)
	debug.FreeOSMemory()
	before := rssBytes()
	for i := 1; i < memObjects; i++ {
		keep[i] = newOne(i)
	}
	debug.FreeOSMemory()
	after := rssBytes()
	fmt.Printf("bytes=%.1f\n", (after-before)/float64(memObjects-1))
	runtime.KeepAlive(keep)
	runtime.KeepAlive(warm)
	if group != nil {
		group.Close()
	}
	for _, o := range keep {
		if b, ok := o.(*holdoff.Breaker); ok {
			b.Close()
		}
	}
}
