package holdoff

// #include "holdoff.h"
import "C"

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The core validates every configuration and names the field as the conformance suite does
// (breaker.open_interval.initial), in the units of its neutral JSON format (milliseconds).
// A Go caller wrote a BreakerConfig with time.Duration values, so the errors of the typed
// constructors and options are reworded here: the field's Go name (the core's name in Go's
// case), the rule without milliseconds, durations as time.Duration prints them, and the value
// given. Error.Field keeps the core's name, which programs compare. ParseConfig's errors stay
// as the core words them: that JSON is written in milliseconds.

// goTypes are the Go types of the configuration's parts, by the part's name in the core.
var goTypes = map[string]string{
	"breaker":    "BreakerConfig",
	"budget":     "BudgetConfig",
	"quota":      "QuotaConfig",
	"classifier": "ClassifierConfig",
	"fleet":      "BreakerConfig.Fleet",
}

// goOptions are the options that set a field of the core's configuration.
var goOptions = map[string]string{
	"execute.attempt_timeout": "WithAttemptTimeout",
	"execute.total_timeout":   "WithTotalTimeout",
	"group.max_keys":          "WithMaxKeys",
	"fleet.url":               "BreakerConfig.Fleet.URL",
	"fleet.ttl":               "BreakerConfig.Fleet.TTL",
}

// goTripParams are the parameters of the TripPolicy constructors, by the core's field name.
var goTripParams = map[string]map[string]string{
	"consecutive": {"threshold": "n"},
	"window":      {"threshold": "n", "window": "window"},
	"rate":        {"threshold": "rate", "min_calls": "minCalls", "window": "window", "buckets": "buckets"},
}

var goTripFuncs = map[string]string{"consecutive": "ConsecutiveFailures", "window": "FailuresInWindow",
	"rate": "FailureRate"}

// pascal is a snake_case name in Go's exported case: max_rate_limit_duration ->
// MaxRateLimitDuration.
func pascal(snake string) string {
	var b strings.Builder
	for _, w := range strings.Split(snake, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// goField is the Go name of the core's field (breaker.open_interval.initial ->
// BreakerConfig.OpenInterval.Initial; breaker.trip.window -> BreakerConfig.Trip
// (FailuresInWindow window)); trip is the kind of the configured trip policy. A field with no
// Go counterpart keeps the core's name.
func goField(field, trip string) string {
	if o, ok := goOptions[field]; ok {
		return o
	}
	parts := strings.Split(field, ".")
	typ, ok := goTypes[parts[0]]
	if !ok {
		return field
	}
	if len(parts) == 3 && parts[1] == "trip" {
		if p, ok := goTripParams[trip][parts[2]]; ok {
			return fmt.Sprintf("%s.Trip (%s %s)", typ, goTripFuncs[trip], p)
		}
		return typ + ".Trip"
	}
	name := typ
	for _, p := range parts[1:] {
		name += "." + pascal(p)
	}
	return name
}

var (
	// coreDuration is a duration as the core words it in a rule (60s, 1500ms).
	coreDuration = regexp.MustCompile(`\b(\d+)(ms|s)\b`)
	// coreName is a field of the same part named in a rule (retry_after_cap).
	coreName = regexp.MustCompile(`\b[a-z]+(?:_[a-z]+)+\b`)
)

// goRule rewords the core's rule for a Go caller: no milliseconds, durations as time.Duration
// prints them, the fields it names by their Go names.
func goRule(field, rule, trip string) string {
	for _, r := range [][2]string{
		{" (milliseconds)", ""},
		{"a number of milliseconds", "a duration"},
		{"a finite number of milliseconds", "a finite duration"},
		// The core's largest duration is longer than any time.Duration: only ParseConfig's
		// JSON can reach it.
		{"(at most 2^53-1 milliseconds)", "(longer than a time.Duration holds)"},
	} {
		rule = strings.ReplaceAll(rule, r[0], r[1])
	}
	rule = coreDuration.ReplaceAllStringFunc(rule, func(s string) string {
		m := coreDuration.FindStringSubmatch(s)
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return s
		}
		if m[2] == "s" {
			return (time.Duration(n) * time.Second).String()
		}
		return (time.Duration(n) * time.Millisecond).String()
	})
	part := field[:strings.LastIndexByte(field, '.')+1]
	rule = coreName.ReplaceAllStringFunc(rule, func(s string) string { return goField(part+s, trip) })
	if strings.HasSuffix(field, ".max") && strings.HasSuffix(rule, ">= initial") {
		rule = strings.TrimSuffix(rule, "initial") + goField(part+"initial", trip)
	}
	return rule
}

// goValue prints a value of the neutral format for a Go caller: a duration (field *_ms) as
// time.Duration prints it.
func goValue(key string, v any) string {
	if f, ok := v.(float64); ok && strings.HasSuffix(key, "_ms") {
		return time.Duration(math.Round(f * 1e6)).String()
	}
	if d, ok := v.(time.Duration); ok {
		return d.String()
	}
	return fmt.Sprint(v)
}

// specValue finds the value given for the core's field in a configuration spec (a duration
// under its key with _ms), and its key.
func specValue(spec map[string]any, field string) (string, any, bool) {
	parts := strings.Split(field, ".")
	m := spec
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return "", nil, false
		}
		m = next
	}
	leaf := parts[len(parts)-1]
	for _, k := range []string{leaf + "_ms", leaf} {
		if v, ok := m[k]; ok {
			return k, v, true
		}
	}
	return "", nil, false
}

// inGoTerms rewords an *Error of the core about a configuration built from spec (a typed
// configuration or option; nil for none) for a Go caller. Other errors pass unchanged.
func inGoTerms(err error, spec map[string]any) error {
	e, ok := err.(*Error)
	if !ok || e.Field == "" || (e.status != C.HOLDOFF_STATUS_INVALID_CONFIG && e.status != C.HOLDOFF_STATUS_INVALID_INPUT) {
		return err
	}
	trip := ""
	if b, ok := spec["breaker"].(map[string]any); ok {
		if t, ok := b["trip"].(map[string]any); ok {
			trip, _ = t["policy"].(string)
		}
	}
	what := "invalid configuration"
	if e.status == C.HOLDOFF_STATUS_INVALID_INPUT {
		what = "invalid input"
	}
	rule := strings.TrimPrefix(e.Message, what+": "+e.Field+": ")
	msg := what + ": " + goField(e.Field, trip) + ": " + goRule(e.Field, rule, trip)
	if key, v, ok := specValue(spec, e.Field); ok {
		msg += ", got " + goValue(key, v)
	}
	out := *e
	out.Message = msg
	return &out
}

// nilErr is the error of a nil argument or receiver: an *Error matching ErrInvalidInput whose
// Field names it.
func nilErr(param string) error {
	return inputErr(param, "must not be nil")
}

// nilPanic is what a method without an error result does on a nil receiver: panic with the
// *Error nilErr gives, as it does with ErrClosed after Close.
func nilPanic(param string) {
	panic(nilErr(param))
}
