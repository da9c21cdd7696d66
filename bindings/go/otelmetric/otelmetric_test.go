package otelmetric_test

// Observe against the real SDK (go.opentelemetry.io/otel/sdk/metric) and its ManualReader: a
// scripted scenario on the manual clock, collected, every value and attribute asserted.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	holdoff "holdoff.dev/go"
	"holdoff.dev/go/otelmetric"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func manualClock(t *testing.T) *holdoff.ManualClock {
	t.Helper()
	return must(holdoff.NewManualClock(time.Unix(1_700_000_000, 0)))
}

// advancing is a sleeper that moves the manual clock by the wait.
func advancing(clock *holdoff.ManualClock) holdoff.Option {
	return holdoff.WithSleeper(func(_ context.Context, d time.Duration) error { return clock.Advance(d) })
}

// point is one collected data point.
type point struct {
	value     float64
	monotonic bool // a cumulative monotonic sum; false for a gauge
}

// collect reads every data point of the reader as series (name{k=v,...}, attributes sorted by
// key) and checks each metric's unit and description against the table.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	defs := map[string]holdoff.MetricDef{}
	for _, d := range holdoff.Metrics() {
		defs[d.Name] = d
	}
	out := map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d, ok := defs[m.Name]
			if !ok || m.Unit != d.Unit || m.Description != d.Description {
				t.Errorf("%s: unit %q, description %q; the table has %+v", m.Name, m.Unit, m.Description, d)
			}
			add := func(series string, p point) {
				if _, dup := out[series]; dup {
					t.Errorf("%s collected twice", series)
				}
				out[series] = p
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[float64]:
				if !data.IsMonotonic || data.Temporality != metricdata.CumulativeTemporality || d.Kind != holdoff.MetricCounter {
					t.Errorf("%s: a sum, monotonic %v, %v; the table says %v", m.Name, data.IsMonotonic, data.Temporality, d.Kind)
				}
				for _, dp := range data.DataPoints {
					add(seriesOf(m.Name, dp.Attributes.ToSlice()), point{dp.Value, true})
				}
			case metricdata.Gauge[float64]:
				if d.Kind != holdoff.MetricGauge {
					t.Errorf("%s: a gauge; the table says %v", m.Name, d.Kind)
				}
				for _, dp := range data.DataPoints {
					add(seriesOf(m.Name, dp.Attributes.ToSlice()), point{dp.Value, false})
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func seriesOf(name string, attrs []attribute.KeyValue) string {
	if len(attrs) == 0 {
		return name
	}
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = string(a.Key) + "=" + a.Value.Emit()
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// nonZero is the collected series whose value is not 0, with their values.
func nonZero(points map[string]point) map[string]float64 {
	out := map[string]float64{}
	for s, p := range points {
		if p.value != 0 {
			out[s] = p.value
		}
	}
	return out
}

func equal(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	var diff []string
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			diff = append(diff, fmt.Sprintf("%s: want %v, got %v", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: want nothing, got %v", k, g))
		}
	}
	sort.Strings(diff)
	t.Errorf("%s:\n  %s", what, strings.Join(diff, "\n  "))
}

// The scenario: a breaker (upstream payments) trips after 5 failures, refuses 2 calls, admits a
// probe 10 s later that closes it; a policy (upstream search) retries once after a 2 s
// Retry-After, its retry paid by its quota; a group's two keys. One collection carries all of
// it, each series once with its upstream.
func TestObserveReportsTheScenario(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	meter := provider.Meter("holdoff-test")

	cfg := holdoff.DefaultBreakerConfig()
	cfg.OpenInterval = holdoff.Backoff{Initial: 10 * time.Second, Multiplier: 1, Max: 10 * time.Second}
	cfg.Recoveries = 1
	b := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	defer b.Close()
	// Not counted: counting starts when Observe reads the breaker.
	must(b.Record(must(b.Allow()), holdoff.Failure))
	must(b.Record(must(b.Allow()), holdoff.Success))
	regB := must(otelmetric.Observe(meter, b, otelmetric.WithUpstream("payments")))
	defer regB.Unregister()
	for range 5 {
		must(b.Record(must(b.Allow()), holdoff.Failure))
	}
	for range 2 {
		if _, err := b.Allow(); !errors.Is(err, holdoff.ErrBreakerOpen) {
			t.Fatalf("refusal: %v", err)
		}
	}
	if err := clock.Advance(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	probe := must(b.Allow())
	must(b.Record(probe, holdoff.Success))

	pcfg := holdoff.DefaultPolicyConfig()
	pcfg.Breaker = cfg
	quota := holdoff.DefaultQuotaConfig()
	pcfg.Quota = &quota
	p := must(holdoff.NewPolicy(pcfg, holdoff.WithClock(clock), advancing(clock)))
	defer p.Close()
	regP := must(otelmetric.Observe(meter, p, otelmetric.WithUpstream("search")))
	defer regP.Unregister()
	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempts++
		if attempts == 1 {
			return holdoff.AsRetryLater(2*time.Second, errors.New("busy"))
		}
		return nil
	})
	if err != nil || attempts != 2 {
		t.Fatalf("Do: %v after %d attempts", err, attempts)
	}

	g := must(holdoff.NewBreakerGroup(cfg, holdoff.WithClock(clock)))
	defer g.Close()
	regG := must(otelmetric.Observe(meter, g))
	defer regG.Unregister()
	for _, key := range []string{"eu", "us"} {
		gb := must(g.Get(key))
		must(gb.Record(must(gb.Allow()), holdoff.Failure))
		gb.Close()
	}

	points := collect(t, reader)
	// Every series, zeros included: a breaker's 24 (twice, plus the group's two), the policy's
	// 19, the quota's 2, the group's 2.
	if len(points) != 24*4+19+2+2 {
		t.Errorf("%d series collected, want %d", len(points), 24*4+19+2+2)
	}
	equal(t, "collected", nonZero(points), map[string]float64{
		"holdoff.breaker.state{state=closed,upstream=payments}":                1,
		"holdoff.breaker.admitted{upstream=payments}":                          6,
		"holdoff.breaker.refused{upstream=payments}":                           2,
		"holdoff.breaker.outcomes{outcome=failure,upstream=payments}":          5,
		"holdoff.breaker.outcomes{outcome=success,upstream=payments}":          1,
		"holdoff.breaker.probes{upstream=payments}":                            1,
		"holdoff.breaker.transitions{reason=tripped,upstream=payments}":        1,
		"holdoff.breaker.transitions{reason=probe_admitted,upstream=payments}": 1,
		"holdoff.breaker.transitions{reason=recovered,upstream=payments}":      1,

		"holdoff.retry.attempts{upstream=search}":                            2,
		"holdoff.retry.retries{upstream=search}":                             1,
		"holdoff.retry.waits{source=retry_after,upstream=search}":            1,
		"holdoff.retry.wait.duration{source=retry_after,upstream=search}":    2,
		"holdoff.breaker.state{state=closed,upstream=search}":                1,
		"holdoff.breaker.admitted{upstream=search}":                          2,
		"holdoff.breaker.outcomes{outcome=retry_later,upstream=search}":      1,
		"holdoff.breaker.outcomes{outcome=success,upstream=search}":          1,
		"holdoff.breaker.probes{upstream=search}":                            1,
		"holdoff.breaker.transitions{reason=retry_later,upstream=search}":    1,
		"holdoff.breaker.transitions{reason=probe_admitted,upstream=search}": 1,
		"holdoff.breaker.transitions{reason=recovered,upstream=search}":      1,
		"holdoff.quota.tokens{upstream=search}":                              500,

		"holdoff.group.keys":                                    2,
		"holdoff.breaker.state{state=closed,upstream=eu}":       1,
		"holdoff.breaker.state{state=closed,upstream=us}":       1,
		"holdoff.breaker.admitted{upstream=eu}":                 1,
		"holdoff.breaker.admitted{upstream=us}":                 1,
		"holdoff.breaker.outcomes{outcome=failure,upstream=eu}": 1,
		"holdoff.breaker.outcomes{outcome=failure,upstream=us}": 1,
	})
	for s, p := range points {
		gauge := strings.HasPrefix(s, "holdoff.breaker.state{") || strings.HasPrefix(s, "holdoff.quota.tokens{") ||
			s == "holdoff.group.keys"
		if p.monotonic == gauge {
			t.Errorf("%s: monotonic sum %v", s, p.monotonic)
		}
	}

	// Read at collection time: the gauges follow the objects, an unregistered target is gone, a
	// closed one is skipped.
	b.ForceOpen()
	if err := regP.Unregister(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	points = collect(t, reader)
	for s := range points {
		if strings.Contains(s, "upstream=search") || strings.Contains(s, "upstream=eu") || s == "holdoff.group.keys" {
			t.Errorf("%s still collected", s)
		}
	}
	if v := points["holdoff.breaker.state{state=forced_open,upstream=payments}"].value; v != 1 {
		t.Errorf("forced open: %v", v)
	}
}

// countingMeter counts the instruments created through it.
type countingMeter struct {
	metric.Meter
	created *int
}

func (m countingMeter) Float64ObservableCounter(name string, opts ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	*m.created++
	return m.Meter.Float64ObservableCounter(name, opts...)
}

func (m countingMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	*m.created++
	return m.Meter.Float64ObservableGauge(name, opts...)
}

func TestInstrumentsAreCreatedOncePerMeter(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	var created int
	meter := countingMeter{noop.NewMeterProvider().Meter("x"), &created}
	for _, up := range []string{"a", "b", "c"} {
		b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
		defer b.Close()
		must(otelmetric.Observe(meter, b, otelmetric.WithUpstream(up)))
	}
	if created != len(holdoff.Metrics()) {
		t.Errorf("%d instruments created for three targets, want %d", created, len(holdoff.Metrics()))
	}
}

func TestObserveRefusesBadInput(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	meter := noop.NewMeterProvider().Meter("x")
	g := must(holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	defer g.Close()
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	b.Close()
	var nilQuota *holdoff.RetryQuota
	for _, c := range []struct {
		observe  func() (metric.Registration, error)
		sentinel error
		field    string
	}{
		{func() (metric.Registration, error) { return otelmetric.Observe(nil, g) }, holdoff.ErrInvalidInput, "meter"},
		{func() (metric.Registration, error) {
			return otelmetric.Observe(meter, g, otelmetric.WithUpstream("x"))
		}, holdoff.ErrInvalidInput, "upstream"},
		{func() (metric.Registration, error) { return otelmetric.Observe(meter, nilQuota) }, holdoff.ErrInvalidInput, "quota"},
		{func() (metric.Registration, error) { return otelmetric.Observe(meter, b) }, holdoff.ErrClosed, ""},
	} {
		reg, err := c.observe()
		var he *holdoff.Error
		if reg != nil || !errors.Is(err, c.sentinel) || (c.field != "" && (!errors.As(err, &he) || he.Field != c.field)) {
			t.Errorf("want %v naming %q, got %v, %v", c.sentinel, c.field, reg, err)
		}
	}
}
