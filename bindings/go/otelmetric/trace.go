package otelmetric

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"holdoff.dev/go/internal/bridge"
)

// The span events' names and attributes, the same in every holdoff SDK.
const (
	RetryEvent  = "holdoff.retry"
	GiveUpEvent = "holdoff.give_up"
)

// Linked in, the package puts the retry helpers' events on the caller's span.
func init() { bridge.SetTracer(spanEvents{}) }

// spanEvents adds the events to the span of the helper's context, when it is recording.
type spanEvents struct{}

func (spanEvents) Retry(ctx context.Context, r bridge.Retry) {
	if span := recording(ctx); span != nil {
		span.AddEvent(RetryEvent, trace.WithAttributes(
			attribute.Int("holdoff.attempt", r.Attempt),
			attribute.String("holdoff.outcome", r.Outcome),
			attribute.Float64("holdoff.delay", r.Delay.Seconds()),
			attribute.String("holdoff.source", r.Source),
			attribute.Bool("holdoff.capped", r.Capped),
		))
	}
}

func (spanEvents) GiveUp(ctx context.Context, g bridge.GiveUp) {
	if span := recording(ctx); span != nil {
		span.AddEvent(GiveUpEvent, trace.WithAttributes(
			attribute.Int("holdoff.attempts", g.Attempts),
			attribute.String("holdoff.reason", g.Reason),
		))
	}
}

// recording is the span of ctx if it is recording, else nil.
func recording(ctx context.Context) trace.Span {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return span
	}
	return nil
}
