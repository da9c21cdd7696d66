package holdoff

// #include "holdoff.h"
import "C"

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"holdoff.dev/go/internal/bridge"
)

func init() { bridge.InvalidInput = inputErr }

// MetricKind is whether a metric is a cumulative count or a value read as it is.
type MetricKind uint32

// Metric kinds.
const (
	// MetricCounter is monotonic and cumulative since counting started (an OpenTelemetry
	// observable counter, a Prometheus counter).
	MetricCounter MetricKind = C.HOLDOFF_METRIC_KIND_COUNTER
	// MetricGauge is the current value, read at collection time (an observable gauge).
	MetricGauge MetricKind = C.HOLDOFF_METRIC_KIND_GAUGE
)

// String is counter or gauge.
func (k MetricKind) String() string {
	switch k {
	case MetricCounter:
		return "counter"
	case MetricGauge:
		return "gauge"
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// MetricDef is one row of the metric table (docs/metrics.md), as the core defines it.
type MetricDef struct {
	// Name is the OpenTelemetry name, holdoff.<object>.<what> (holdoff.breaker.refused).
	Name string
	Kind MetricKind
	// Unit is UCUM: s (seconds), 1, or an annotation such as {call}.
	Unit string
	// Description is what it counts, one sentence.
	Description string
	// Attribute is the metric's own attribute (state, outcome, reason, source), "" if none.
	Attribute string
	// Values are the attribute's values, in the core's code order (nil without attribute).
	Values []string
}

// metricTable is the core's table, read once through the C ABI.
var metricTable = sync.OnceValue(func() []MetricDef {
	n := int(C.holdoff_metric_count())
	defs := make([]MetricDef, n)
	for i := range defs {
		var info C.holdoff_metric_info
		if st := C.holdoff_metric_describe(C.uint32_t(i), &info); st != C.HOLDOFF_STATUS_OK {
			panic(fmt.Errorf("holdoff: metric %d of %d: %w", i, n, errOf(st)))
		}
		d := MetricDef{Name: C.GoString(info.name), Kind: MetricKind(info.kind), Unit: C.GoString(info.unit),
			Description: C.GoString(info.description)}
		if info.attribute != nil {
			d.Attribute = C.GoString(info.attribute)
			d.Values = make([]string, int(info.value_count))
			for j := range d.Values {
				d.Values[j] = C.GoString(C.holdoff_metric_attribute_value(C.uint32_t(i), C.uint32_t(j)))
			}
		}
		defs[i] = d
	}
	return defs
})

// Metrics returns the metric table: every series a Breaker, Policy, RetryQuota and
// BreakerGroup report, in the core's order (17 rows). The slice is the caller's own copy.
func Metrics() []MetricDef {
	defs := slices.Clone(metricTable())
	for i := range defs {
		defs[i].Values = slices.Clone(defs[i].Values)
	}
	return defs
}

// Attribute is one attribute of a MetricReading.
type Attribute struct {
	Key, Value string
}

// MetricReading is one series' value at the time of the read.
type MetricReading struct {
	// Name is the metric's name (MetricDef.Name).
	Name string
	// Attributes are the metric's own attribute, if it has one, and for a group's breakers
	// upstream (the key), sorted by key.
	Attributes []Attribute
	// Value is in the metric's unit: a count, a duration in seconds, 1 or 0 for a state, a
	// number of tokens or keys.
	Value float64
}

// Series is the reading's series as the conformance suite and the simulator write it: name,
// or name{key=value,...} with the attributes sorted by key.
func (r MetricReading) Series() string {
	if len(r.Attributes) == 0 {
		return r.Name
	}
	var s strings.Builder
	s.WriteString(r.Name)
	sep := byte('{')
	for _, a := range r.Attributes {
		s.WriteByte(sep)
		s.WriteString(a.Key + "=" + a.Value)
		sep = ','
	}
	s.WriteByte('}')
	return s.String()
}

// Metrics reads the breaker's series (docs/metrics.md): its state (one series per state, 1 for
// the current one), admitted, refused, outcomes by kind, stale answers, probes, transitions
// by reason; every series, zeros included. Counting starts at the breaker's first read of its
// metrics (exporters read once when they attach); before it, counters read 0. Errors: ErrClosed
// after Close; an *Error matching ErrInvalidInput (field breaker) for a nil b.
func (b *Breaker) Metrics() ([]MetricReading, error) {
	if b == nil {
		return nil, nilErr("breaker")
	}
	return readMetrics(&b.h, func(h *C.holdoff_breaker, out **C.holdoff_metric_list) C.holdoff_status {
		return C.holdoff_breaker_metrics(h, out)
	})
}

// Metrics reads the policy's retry series: attempts, retries, waits and their total
// duration in seconds by source, capped waits, give-ups by reason; every series, zeros
// included. Its breaker's and quota's series are their own Metrics. Counting starts at the
// policy's first read. Errors: ErrClosed after Close; ErrInvalidInput (field policy) for a nil
// p.
func (p *Policy) Metrics() ([]MetricReading, error) {
	if p == nil {
		return nil, nilErr("policy")
	}
	return readMetrics(&p.h, func(h *C.holdoff_policy, out **C.holdoff_metric_list) C.holdoff_status {
		return C.holdoff_policy_metrics(h, out)
	})
}

// Metrics reads the quota's series: the tokens available now, and the retries it refused
// (counted from its first read). Errors: ErrClosed after Close; ErrInvalidInput (field quota)
// for a nil q.
func (q *RetryQuota) Metrics() ([]MetricReading, error) {
	if q == nil {
		return nil, nilErr("quota")
	}
	return readMetrics(&q.h, func(h *C.holdoff_retry_quota, out **C.holdoff_metric_list) C.holdoff_status {
		return C.holdoff_retry_quota_metrics(h, out)
	})
}

// Metrics reads the group's series, holdoff.group.keys and holdoff.group.evictions, then each
// breaker the group keeps, in key order, with the attribute upstream set to its key. The
// group's first read starts counting on all its breakers, current and later. Errors: ErrClosed
// after Close; ErrInvalidInput (field group) for a nil g.
func (g *BreakerGroup) Metrics() ([]MetricReading, error) {
	if g == nil {
		return nil, nilErr("group")
	}
	return readMetrics(&g.h, func(h *C.holdoff_breaker_group, out **C.holdoff_metric_list) C.holdoff_status {
		return C.holdoff_breaker_group_metrics(h, out)
	})
}

// readMetrics reads an object's metric list through read, under a use of its handle, and
// converts it.
func readMetrics[P any](h heldHandle[P], read func(P, **C.holdoff_metric_list) C.holdoff_status) ([]MetricReading, error) {
	p, err := h.acquire()
	if err != nil {
		return nil, err
	}
	var list *C.holdoff_metric_list
	st := read(p, &list)
	h.release()
	if st != C.HOLDOFF_STATUS_OK {
		return nil, errOf(st)
	}
	defer C.holdoff_metric_list_free(list)
	table := metricTable()
	n := int(C.holdoff_metric_list_len(list))
	out := make([]MetricReading, n)
	for i := range out {
		var s C.holdoff_metric_sample
		if st := C.holdoff_metric_list_get(list, C.size_t(i), &s); st != C.HOLDOFF_STATUS_OK {
			return nil, errOf(st)
		}
		if int(s.metric) >= len(table) {
			return nil, fmt.Errorf("holdoff: metric code %d outside the table: %w", uint32(s.metric), ErrInternal)
		}
		d := &table[s.metric]
		r := MetricReading{Name: d.Name, Value: float64(s.value)}
		if s.attribute != C.HOLDOFF_METRIC_NO_ATTRIBUTE && int(s.attribute) < len(d.Values) {
			r.Attributes = append(r.Attributes, Attribute{d.Attribute, d.Values[s.attribute]})
		}
		if s.upstream != nil {
			r.Attributes = append(r.Attributes, Attribute{"upstream", C.GoString(s.upstream)})
			slices.SortFunc(r.Attributes, func(a, b Attribute) int { return strings.Compare(a.Key, b.Key) })
		}
		out[i] = r
	}
	return out, nil
}
