package otelmetric_test

// The retry helpers' span events against the real trace SDK and its in-memory span recorder
// (go.opentelemetry.io/otel/sdk/trace/tracetest), on the manual clock.

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	holdoff "holdoff.dev/go"
	"holdoff.dev/go/otelmetric"
)

// event is a span event as the test compares it.
type event struct {
	name  string
	attrs map[string]any
}

// traced runs call under a recording span and returns the span's events.
func traced(t *testing.T, call func(ctx context.Context)) []event {
	t.Helper()
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer provider.Shutdown(context.Background())
	ctx, span := provider.Tracer("holdoff-test").Start(context.Background(), "checkout")
	call(ctx)
	span.End()
	spans := recorder.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended", len(spans))
	}
	var out []event
	for _, e := range spans[0].Events() {
		attrs := map[string]any{}
		for _, kv := range e.Attributes {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		out = append(out, event{e.Name, attrs})
	}
	return out
}

func retryEvent(attempt int, outcome string, delay float64, source string, capped bool) event {
	return event{otelmetric.RetryEvent, map[string]any{"holdoff.attempt": int64(attempt), "holdoff.outcome": outcome,
		"holdoff.delay": delay, "holdoff.source": source, "holdoff.capped": capped}}
}

func giveUpEvent(attempts int, reason string) event {
	return event{otelmetric.GiveUpEvent, map[string]any{"holdoff.attempts": int64(attempts), "holdoff.reason": reason}}
}

func sameEvents(t *testing.T, got, want []event) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
}

// A failure waits the budget's backoff; a Retry-After above the budget's cap is capped, but the
// breaker it opened holds the retry for the server's whole delay (the wait is never shorter
// than the breaker needs); the probe succeeds: two retry events, no give-up.
func TestRetryEvents(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultPolicyConfig()
	cfg.Breaker.Recoveries = 1
	cfg.Budget.Backoff = holdoff.Backoff{Initial: 250 * time.Millisecond, Multiplier: 2, Max: time.Second}
	cfg.Budget.RetryAfterCap = 2 * time.Second
	cfg.Budget.MaxRateLimitDuration = time.Minute
	p := must(holdoff.NewPolicy(cfg, holdoff.WithClock(clock), advancing(clock)))
	defer p.Close()
	attempts := 0
	events := traced(t, func(ctx context.Context) {
		err := p.Do(ctx, func(context.Context) error {
			attempts++
			switch attempts {
			case 1:
				return errors.New("connection reset")
			case 2:
				return holdoff.AsRetryLater(3*time.Second, errors.New("busy"))
			}
			return nil
		})
		if err != nil || attempts != 3 {
			t.Errorf("Do: %v after %d attempts", err, attempts)
		}
	})
	sameEvents(t, events, []event{
		retryEvent(1, "failure", 0.25, "backoff", false),
		retryEvent(2, "retry_later", 3, "breaker", true),
	})
}

// A call that runs out of retries and one the breaker refuses at once each end with a give-up
// event naming the reason the error carries; a call that succeeds at once, one the caller
// cancels (past its retry event), or one without a recording span adds nothing.
func TestGiveUpEvents(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultPolicyConfig()
	cfg.Breaker.Trip = holdoff.ConsecutiveFailures(2)
	cfg.Budget.MaxRetries = 1
	cfg.Budget.Backoff = holdoff.Backoff{Initial: 500 * time.Millisecond, Multiplier: 2, Max: time.Second}
	p := must(holdoff.NewPolicy(cfg, holdoff.WithClock(clock), advancing(clock)))
	defer p.Close()
	fail := func(context.Context) error { return errors.New("connection refused") }

	var gaveUp *holdoff.GiveUpError
	events := traced(t, func(ctx context.Context) {
		if err := p.Do(ctx, func(context.Context) error { return nil }); err != nil {
			t.Errorf("first call: %v", err)
		}
		if err := p.Do(ctx, fail); !errors.As(err, &gaveUp) {
			t.Errorf("second call: %v", err)
		}
		// The two failures tripped the breaker: the next call is refused before any attempt.
		if err := p.Do(ctx, fail); !errors.Is(err, holdoff.ErrBreakerOpen) {
			t.Errorf("third call: %v", err)
		}
	})
	sameEvents(t, events, []event{
		retryEvent(1, "failure", 0.5, "backoff", false),
		giveUpEvent(2, gaveUp.Reason.String()),
		giveUpEvent(0, "breaker_open"),
	})
	if gaveUp.Reason != holdoff.AttemptsExhausted {
		t.Errorf("gave up for %v", gaveUp.Reason)
	}

	p.Breaker().Reset()
	events = traced(t, func(ctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		err := p.Do(ctx, fail, holdoff.WithSleeper(func(context.Context, time.Duration) error {
			cancel()
			return context.Canceled
		}))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v", err)
		}
	})
	sameEvents(t, events, []event{retryEvent(1, "failure", 0.5, "backoff", false)})

	// No recording span: nothing to add to, nothing fails.
	p.Breaker().Reset()
	nonRecording := trace.ContextWithSpan(context.Background(), trace.SpanFromContext(context.Background()))
	for _, ctx := range []context.Context{nonRecording, context.Background()} {
		if err := p.Do(ctx, fail); !errors.As(err, &gaveUp) {
			t.Errorf("call without a recording span: %v", err)
		}
		p.Breaker().Reset()
	}
}
