package bench_test

// allow+record on a closed breaker: holdoff through cgo against sony/gobreaker's equivalent,
// in the same run (go test -bench . in bench/go).

import (
	"context"
	"testing"

	"github.com/sony/gobreaker/v2"
	holdoff "holdoff.dev/go"
)

func newBench(b *testing.B) *holdoff.Breaker {
	br, err := holdoff.NewBreaker(holdoff.DefaultBreakerConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	return br
}

func BenchmarkHoldoffAllowRecord(b *testing.B) {
	br := newBench(b)
	for b.Loop() {
		p, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		br.Record(p, holdoff.Success)
	}
}

func BenchmarkHoldoffDo(b *testing.B) {
	br := newBench(b)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for b.Loop() {
		br.Do(ctx, fn)
	}
}

func BenchmarkGobreakerTwoStep(b *testing.B) {
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
	for b.Loop() {
		done, err := cb.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

func BenchmarkGobreakerExecute(b *testing.B) {
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
	fn := func() (struct{}, error) { return struct{}{}, nil }
	for b.Loop() {
		cb.Execute(fn)
	}
}

func BenchmarkHoldoffDoParallel(b *testing.B) {
	br := newBench(b)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.Do(ctx, fn)
		}
	})
}

func BenchmarkGobreakerExecuteParallel(b *testing.B) {
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "bench"})
	fn := func() (struct{}, error) { return struct{}{}, nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cb.Execute(fn)
		}
	})
}
