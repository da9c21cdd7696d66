// Package otelmetric reports holdoff's metrics (docs/metrics.md) through OpenTelemetry's
// metric API, and puts the retry helpers' waits and give-ups on the caller's span.
//
// Metrics: Observe attaches a Breaker, a Policy (its retry series, its breaker's and its
// quota's), a RetryQuota or a BreakerGroup to a metric.Meter. Each row of the table
// (holdoff.Metrics) is one observable instrument, a Float64ObservableCounter or a
// Float64ObservableGauge, created once per meter; a callback registered with the meter reads
// the target when the SDK collects, so exporting adds nothing to a call (the counting itself,
// from the target's first read on, is one or two thread-striped counts per call). Durations
// are in seconds (unit s), as OpenTelemetry has them.
//
//	reg, err := otelmetric.Observe(meter, policy, otelmetric.WithUpstream("payments"))
//	if err != nil {
//		return err
//	}
//	defer reg.Unregister()
//
// Traces: importing this package makes Policy.Do and Policy.DoHTTP add events to the span of
// the context they are given, when it is recording: "holdoff.retry" for each wait decided
// before a retry (holdoff.attempt, the attempt that just ended, 1-based; holdoff.outcome, its
// outcome; holdoff.delay, seconds; holdoff.source; holdoff.capped) and "holdoff.give_up" when
// the call ends in a *holdoff.GiveUpError or *holdoff.BreakerOpenError (holdoff.attempts;
// holdoff.reason, as in holdoff.retry.give_ups: the error's Reason, breaker_open for a
// refusal). A call that succeeds at its first attempt adds nothing; one the caller cancels adds
// no give-up event.
//
// The package needs go.opentelemetry.io/otel/metric and go.opentelemetry.io/otel/trace;
// package holdoff itself imports no OpenTelemetry.
package otelmetric

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	holdoff "holdoff.dev/go"
	"holdoff.dev/go/internal/bridge"
)

// Target is what Observe reports: a breaker, a policy (its retry series and its breaker's and
// quota's), a retry quota, or a breaker group (its own series and each kept breaker's, with
// upstream set to the breaker's key).
type Target interface {
	*holdoff.Breaker | *holdoff.Policy | *holdoff.RetryQuota | *holdoff.BreakerGroup
}

// Option configures Observe.
type Option func(*options)

type options struct {
	upstream    string
	hasUpstream bool
}

// WithUpstream adds the attribute upstream=name to every series of a breaker, policy or quota
// (a group's breakers carry their keys instead), so that several upstreams can share a meter.
func WithUpstream(name string) Option {
	return func(o *options) { o.upstream, o.hasUpstream = name, true }
}

// source is one object read at each collection.
type source struct {
	read     func() ([]holdoff.MetricReading, error)
	upstream *attribute.KeyValue // added to each reading; nil for none
}

// Observe reports target's metrics through meter until the returned registration's
// Unregister (the target's type is checked at compile time: Target). It reads target once now
// (counting starts at an object's first read, so the calls made before Observe are not
// counted), then at every collection. Several targets may share a meter (the instruments are
// created once per meter); give each its own upstream, or their series coincide (the SDK adds
// them up).
//
// A target closed while observed is skipped. Errors: an *holdoff.Error matching
// holdoff.ErrInvalidInput naming meter (nil), upstream (WithUpstream with a group), or the
// nil target (breaker, policy, quota, group); ErrClosed for a closed target; the meter's own
// errors creating the instruments or registering the callback.
func Observe[T Target](meter metric.Meter, target T, opts ...Option) (metric.Registration, error) {
	if meter == nil {
		return nil, bridge.InvalidInput("meter", "must not be nil")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var up *attribute.KeyValue
	if o.hasUpstream {
		kv := attribute.String("upstream", o.upstream)
		up = &kv
	}
	var sources []source
	switch t := any(target).(type) {
	case *holdoff.Breaker:
		sources = []source{{t.Metrics, up}}
	case *holdoff.RetryQuota:
		sources = []source{{t.Metrics, up}}
	case *holdoff.Policy:
		sources = []source{{t.Metrics, up}}
		if t != nil {
			sources = append(sources, source{t.Breaker().Metrics, up})
			if q := t.Quota(); q != nil {
				sources = append(sources, source{q.Metrics, up})
			}
		}
	case *holdoff.BreakerGroup:
		if o.hasUpstream {
			return nil, bridge.InvalidInput("upstream", "a group's breakers carry their keys as upstream")
		}
		sources = []source{{t.Metrics, nil}}
	}
	for _, s := range sources {
		if _, err := s.read(); err != nil {
			return nil, err
		}
	}
	inst, err := instrumentsOf(meter)
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		var errs []error
		for _, s := range sources {
			readings, err := s.read()
			if errors.Is(err, holdoff.ErrClosed) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, r := range readings {
				if i, ok := inst.byName[r.Name]; ok {
					obs.ObserveFloat64(i, r.Value, metric.WithAttributeSet(attributesOf(r, s.upstream)))
				}
			}
		}
		return errors.Join(errs...)
	}, inst.all...)
}

func attributesOf(r holdoff.MetricReading, upstream *attribute.KeyValue) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(r.Attributes)+1)
	for _, a := range r.Attributes {
		kvs = append(kvs, attribute.String(a.Key, a.Value))
	}
	if upstream != nil {
		kvs = append(kvs, *upstream)
	}
	return attribute.NewSet(kvs...)
}

// instruments are one meter's observable instruments, one per row of the table.
type instruments struct {
	byName map[string]metric.Float64Observable
	all    []metric.Observable
}

var (
	instrumentsMu sync.Mutex
	// perMeter keeps each meter's instruments for the life of the process (a program makes a
	// few meters, and an SDK's meter lives as long as its provider anyway).
	perMeter = map[metric.Meter]*instruments{}
)

// instrumentsOf creates meter's instruments on its first use, and returns the same ones after.
func instrumentsOf(meter metric.Meter) (*instruments, error) {
	// A meter whose type cannot be a map key (none of OpenTelemetry's) gets new instruments
	// each time, which the SDKs merge with the earlier ones of the same name.
	keyable := reflect.TypeOf(meter).Comparable()
	instrumentsMu.Lock()
	defer instrumentsMu.Unlock()
	if keyable {
		if inst, ok := perMeter[meter]; ok {
			return inst, nil
		}
	}
	inst := &instruments{byName: map[string]metric.Float64Observable{}}
	for _, d := range holdoff.Metrics() {
		var i metric.Float64Observable
		var err error
		switch d.Kind {
		case holdoff.MetricCounter:
			i, err = meter.Float64ObservableCounter(d.Name, metric.WithUnit(d.Unit), metric.WithDescription(d.Description))
		case holdoff.MetricGauge:
			i, err = meter.Float64ObservableGauge(d.Name, metric.WithUnit(d.Unit), metric.WithDescription(d.Description))
		default:
			err = fmt.Errorf("holdoff/otelmetric: %s: unknown metric kind %v", d.Name, d.Kind)
		}
		if err != nil {
			return nil, err
		}
		inst.byName[d.Name] = i
		inst.all = append(inst.all, i)
	}
	if keyable {
		perMeter[meter] = inst
	}
	return inst, nil
}
