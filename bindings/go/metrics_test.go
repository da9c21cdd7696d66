package holdoff_test

// The metric model's Go surface: the table from the core, the readings of each object, when
// counting starts, and the errors of nil and closed objects. The values of every series are the
// conformance cases' (conformance/cases/metrics); the OpenTelemetry adapter has its own tests
// (otelmetric).

import (
	"errors"
	"reflect"
	"testing"

	holdoff "holdoff.dev/go"
)

func TestMetricTable(t *testing.T) {
	defs := holdoff.Metrics()
	if len(defs) != 17 {
		t.Fatalf("%d metrics, want 17", len(defs))
	}
	state := holdoff.MetricDef{Name: "holdoff.breaker.state", Kind: holdoff.MetricGauge, Unit: "1",
		Description: "1 for the breaker's current state, 0 for the others.", Attribute: "state",
		Values: []string{"closed", "open", "half_open", "forced_open", "disabled"}}
	if !reflect.DeepEqual(defs[0], state) {
		t.Errorf("row 0: %+v\nwant %+v", defs[0], state)
	}
	wait := defs[10]
	if wait.Name != "holdoff.retry.wait.duration" || wait.Kind != holdoff.MetricCounter || wait.Unit != "s" ||
		wait.Attribute != "source" || !reflect.DeepEqual(wait.Values, []string{"retry_after", "backoff", "breaker"}) {
		t.Errorf("row 10: %+v", wait)
	}
	if d := defs[1]; d.Name != "holdoff.breaker.admitted" || d.Attribute != "" || d.Values != nil {
		t.Errorf("row 1: %+v", d)
	}
	if k := holdoff.MetricGauge.String() + " " + holdoff.MetricCounter.String(); k != "gauge counter" {
		t.Errorf("kinds: %s", k)
	}
	// The caller's copy: changing it changes nothing of the next.
	defs[0].Values[0], defs[1].Name = "x", "y"
	if again := holdoff.Metrics(); again[0].Values[0] != "closed" || again[1].Name != "holdoff.breaker.admitted" {
		t.Errorf("the table changed with the caller's copy: %+v", again[:2])
	}
}

// series is the readings as the conformance suite writes them, zeros dropped.
func series(readings []holdoff.MetricReading) map[string]float64 {
	out := map[string]float64{}
	for _, r := range readings {
		if r.Value != 0 {
			out[r.Series()] = r.Value
		}
	}
	return out
}

func TestMetricReadings(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultBreakerConfig()
	cfg.Trip = holdoff.ConsecutiveFailures(2)
	b := must(holdoff.NewBreaker(cfg, holdoff.WithClock(clock)))
	defer b.Close()
	// Before the first read nothing is counted; the state gauge is read live.
	p := must(b.Allow())
	must(b.Record(p, holdoff.Success))
	all, err := b.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 24 { // 5 states, admitted, refused, 6 outcomes, stale, probes, 9 reasons
		t.Errorf("%d breaker readings, want 24", len(all))
	}
	if all[0].Name != "holdoff.breaker.state" || !reflect.DeepEqual(all[0].Attributes, []holdoff.Attribute{{Key: "state", Value: "closed"}}) || all[0].Value != 1 {
		t.Errorf("first reading %+v", all[0])
	}
	if got := series(all); !reflect.DeepEqual(got, map[string]float64{"holdoff.breaker.state{state=closed}": 1}) {
		t.Errorf("first read: %v", got)
	}
	for range 2 {
		must(b.Record(must(b.Allow()), holdoff.Failure))
	}
	_, err = b.Allow()
	want := map[string]float64{"holdoff.breaker.state{state=open}": 1, "holdoff.breaker.admitted": 2,
		"holdoff.breaker.refused": 1, "holdoff.breaker.outcomes{outcome=failure}": 2,
		"holdoff.breaker.transitions{reason=tripped}": 1}
	if got := series(must(b.Metrics())); !errors.Is(err, holdoff.ErrBreakerOpen) || !reflect.DeepEqual(got, want) {
		t.Errorf("after the trip (%v): %v\nwant %v", err, got, want)
	}

	g := must(holdoff.NewBreakerGroup(cfg, holdoff.WithClock(clock)))
	defer g.Close()
	must(g.Metrics())
	for _, key := range []string{"b", "a"} {
		gb := must(g.Get(key))
		must(gb.Record(must(gb.Allow()), holdoff.Failure))
		gb.Close()
	}
	want = map[string]float64{"holdoff.group.keys": 2,
		"holdoff.breaker.state{state=closed,upstream=a}": 1, "holdoff.breaker.state{state=closed,upstream=b}": 1,
		"holdoff.breaker.admitted{upstream=a}": 1, "holdoff.breaker.admitted{upstream=b}": 1,
		"holdoff.breaker.outcomes{outcome=failure,upstream=a}": 1, "holdoff.breaker.outcomes{outcome=failure,upstream=b}": 1}
	if got := series(must(g.Metrics())); !reflect.DeepEqual(got, want) {
		t.Errorf("group: %v\nwant %v", got, want)
	}

	q := must(holdoff.NewRetryQuota(holdoff.QuotaConfig{Capacity: 10, RetryCost: 5, TimeoutCost: 10, SuccessRefill: 1}))
	defer q.Close()
	must(q.Metrics())
	for range 3 {
		q.Acquire(false)
	}
	want = map[string]float64{"holdoff.quota.refused": 1}
	if got := series(must(q.Metrics())); !reflect.DeepEqual(got, want) { // 10 - 5 - 5: none left
		t.Errorf("quota: %v\nwant %v", got, want)
	}
}

func TestMetricsOfNilAndClosed(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock)))
	if got := len(must(p.Metrics())); got != 19 { // attempts, retries, 3 waits, 3 durations, capped, 10 give-ups
		t.Errorf("%d policy readings, want 19", got)
	}
	p.Close()
	if _, err := p.Metrics(); !errors.Is(err, holdoff.ErrClosed) {
		t.Errorf("closed policy: %v", err)
	}
	if _, err := p.Breaker().Metrics(); !errors.Is(err, holdoff.ErrClosed) {
		t.Errorf("closed policy's breaker: %v", err)
	}
	var (
		b *holdoff.Breaker
		g *holdoff.BreakerGroup
		q *holdoff.RetryQuota
		n *holdoff.Policy
	)
	for field, read := range map[string]func() ([]holdoff.MetricReading, error){
		"breaker": b.Metrics, "group": g.Metrics, "quota": q.Metrics, "policy": n.Metrics} {
		_, err := read()
		errorOf(t, field, err, holdoff.ErrInvalidInput, field)
	}
	if n.Quota() != nil {
		t.Error("a nil policy's quota")
	}
}
