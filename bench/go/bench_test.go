package bench_test

// allow+record on a closed breaker (on the fast-path word), a refusal on a tripped one (in place:
// Allow's, with its *BreakerOpenError, and TryAllow's, without) and the protected call, holdoff
// against sony/gobreaker's and failsafe-go's equivalents, in the same run (go test -bench . in
// bench/go; BenchmarkCgoCall in floor_test.go is the crossing alone).

import (
	"context"
	"errors"
	"testing"
	"time"

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

func BenchmarkFailsafeAllowRecord(b *testing.B) {
	cb := newFailsafe()
	for b.Loop() {
		if !cb.TryAcquirePermit() {
			b.Fatal("refused")
		}
		cb.RecordSuccess()
	}
}

func BenchmarkHoldoffRefuse(b *testing.B) {
	br := newBench(b)
	tripHoldoff(br)
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkHoldoffTryAllowRefuse(b *testing.B) {
	br := newBench(b)
	tripHoldoff(br)
	for b.Loop() {
		if _, ok := br.TryAllow(); ok {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkHoldoffTryAllowRecord(b *testing.B) {
	br := newBench(b)
	for b.Loop() {
		p, ok := br.TryAllow()
		if !ok {
			b.Fatal("refused")
		}
		br.Record(&p, holdoff.Success)
	}
}

func BenchmarkHoldoffAllowRecordParallel(b *testing.B) {
	br := newBench(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			br.Record(p, holdoff.Success)
		}
	})
}

func BenchmarkFailsafeAllowRecordParallel(b *testing.B) {
	cb := newFailsafe()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !cb.TryAcquirePermit() {
				b.Fatal("refused")
			}
			cb.RecordSuccess()
		}
	})
}

func BenchmarkGobreakerRefuse(b *testing.B) {
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: "open", Timeout: time.Hour})
	for range 6 {
		done, _ := cb.Allow()
		done(errors.New("boom"))
	}
	for b.Loop() {
		if _, err := cb.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkFailsafeRefuse(b *testing.B) {
	cb := newFailsafe()
	cb.Open()
	for b.Loop() {
		if cb.TryAcquirePermit() {
			b.Fatal("admitted")
		}
	}
}
