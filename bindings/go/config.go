package holdoff

// #include <stdlib.h>
// #include "holdoff.h"
import "C"

import (
	"encoding/json"
	"math"
	"runtime"
	"time"
)

// TripPolicy says when a closed breaker opens. Build one with ConsecutiveFailures,
// FailuresInWindow or FailureRate; the zero value means the default (5 consecutive failures).
type TripPolicy struct {
	kind      string
	threshold int
	rate      float64
	minCalls  int
	window    time.Duration
	buckets   int
}

// ConsecutiveFailures trips after n failures in a row (1..1000000).
func ConsecutiveFailures(n int) TripPolicy { return TripPolicy{kind: "consecutive", threshold: n} }

// FailuresInWindow trips after n failures inside a rolling window.
func FailuresInWindow(n int, window time.Duration) TripPolicy {
	return TripPolicy{kind: "window", threshold: n, window: window}
}

// FailureRate trips when failures/calls >= rate (in (0, 1]) over a rolling window of buckets
// buckets (1..1000; 0 means 10), once minCalls calls were seen in it.
func FailureRate(rate float64, minCalls int, window time.Duration, buckets int) TripPolicy {
	return TripPolicy{kind: "rate", rate: rate, minCalls: minCalls, window: window, buckets: buckets}
}

// Backoff is an exponential interval: min(Initial * Multiplier^n, Max), minus up to Jitter
// (a fraction in [0, 1)) of it.
type Backoff struct {
	Initial    time.Duration
	Multiplier float64
	Max        time.Duration
	Jitter     float64
}

// BreakerConfig configures a Breaker. Start from DefaultBreakerConfig: every field is sent to
// the core as is (a zero duration is refused, not defaulted), except a zero Trip.
type BreakerConfig struct {
	Trip TripPolicy
	// OpenInterval is the wait between probes while open; it never gives up.
	OpenInterval Backoff
	// Recoveries is the consecutive probe answers needed to close (1..1000).
	Recoveries int
	// MaxProbesInFlight is the probes admitted per interval (1..1000).
	MaxProbesInFlight int
	// ProbeTimeout is how long an unanswered probe holds its slot; 0 means the open interval.
	ProbeTimeout time.Duration
	// MaxRetryLater bounds a provider's retry-later delay.
	MaxRetryLater time.Duration
	// Seed seeds the jitter PRNG.
	Seed uint64
}

// DefaultBreakerConfig is the core's default: 5 consecutive failures; open 30 s doubling to
// 5 min, no jitter; 3 recoveries; 1 probe; probe timeout = the interval; retry-later guard
// 5 min.
func DefaultBreakerConfig() BreakerConfig {
	var o C.holdoff_breaker_options
	C.holdoff_breaker_options_init(&o)
	return BreakerConfig{
		Trip: ConsecutiveFailures(int(o.trip_threshold)),
		OpenInterval: Backoff{Initial: dur(o.open_initial_ns), Multiplier: float64(o.open_multiplier),
			Max: dur(o.open_max_ns), Jitter: float64(o.open_jitter)},
		Recoveries:        int(o.recoveries),
		MaxProbesInFlight: int(o.max_probes_in_flight),
		ProbeTimeout:      dur(o.probe_timeout_ns),
		MaxRetryLater:     dur(o.max_retry_later_ns),
		Seed:              uint64(o.seed),
	}
}

// BudgetConfig configures a RetryBudget. Start from DefaultBudgetConfig.
type BudgetConfig struct {
	// MaxRateLimitDuration is the total time of one rate-limit episode; at least twice
	// RetryAfterCap (room for two capped waits).
	MaxRateLimitDuration time.Duration
	// RetryAfterCap caps one Retry-After wait (a guard against absurd headers).
	RetryAfterCap time.Duration
	// MaxRetries is the retries of the counted path (0 disables it).
	MaxRetries int
	// Backoff is the counted path's backoff.
	Backoff Backoff
	// MaxBackoffDuration is the counted path's total time from a call's first failure.
	MaxBackoffDuration time.Duration
	// GiveUpAboveCap says what to do when a server asks for longer than RetryAfterCap: false
	// (the default) waits the cap and the decision says Capped; true gives up at once with
	// RetryAfterAboveCap and the server's delay (for callers who would rather reschedule than
	// ask again before the time the server named).
	GiveUpAboveCap bool
	// Seed seeds the jitter PRNG.
	Seed uint64
}

// DefaultBudgetConfig is the core's default: episode budget 30 min, cap 5 min, 10 retries
// backing off 500 ms doubling to 60 s, counted budget 12 h, a server's delay above the cap
// waits the cap.
func DefaultBudgetConfig() BudgetConfig {
	var o C.holdoff_budget_options
	C.holdoff_budget_options_init(&o)
	return BudgetConfig{
		MaxRateLimitDuration: dur(o.max_rate_limit_duration_ns),
		RetryAfterCap:        dur(o.retry_after_cap_ns),
		MaxRetries:           int(o.max_retries),
		Backoff: Backoff{Initial: dur(o.backoff_initial_ns), Multiplier: float64(o.backoff_multiplier),
			Max: dur(o.backoff_max_ns), Jitter: float64(o.backoff_jitter)},
		MaxBackoffDuration: dur(o.max_backoff_duration_ns),
		GiveUpAboveCap:     o.give_up_above_cap != 0,
		Seed:               uint64(o.seed),
	}
}

// QuotaConfig configures a RetryQuota, in tokens. Start from DefaultQuotaConfig.
type QuotaConfig struct {
	Capacity      int
	RetryCost     int
	TimeoutCost   int
	SuccessRefill int
}

// DefaultQuotaConfig is the AWS SDKs' standard mode: 500 tokens, 5 a retry, 10 a retry after
// a timeout, 1 back per success without retry.
func DefaultQuotaConfig() QuotaConfig {
	var o C.holdoff_quota_options
	C.holdoff_quota_options_init(&o)
	return QuotaConfig{Capacity: int(o.capacity), RetryCost: int(o.retry_cost),
		TimeoutCost: int(o.timeout_cost), SuccessRefill: int(o.success_refill)}
}

// ClassifierConfig overrides the HTTP classifier's defaults. The zero value is the default.
type ClassifierConfig struct {
	// FailureStatuses count as failures (e.g. a provider that blocks with 403).
	FailureStatuses []int
	// AnswerStatuses count as answers (reachable, not retryable).
	AnswerStatuses []int
	// RetryAfterStatuses honour a delay hint; nil means 429 and 503.
	RetryAfterStatuses []int
	// RateLimitDefaultWait is the wait for a 429 without a usable hint; 0 means none (the
	// budget's backoff).
	RateLimitDefaultWait time.Duration
}

// PolicyConfig configures a Policy: its breaker, budget, optional quota and classifier.
type PolicyConfig struct {
	Breaker    BreakerConfig
	Budget     BudgetConfig
	Quota      *QuotaConfig
	Classifier ClassifierConfig
}

// DefaultPolicyConfig is a policy of default parts, without a quota.
func DefaultPolicyConfig() PolicyConfig {
	return PolicyConfig{Breaker: DefaultBreakerConfig(), Budget: DefaultBudgetConfig()}
}

// The neutral JSON format (core/src/config.rs): durations in float milliseconds; non-finite
// floats as the strings "NaN", "Infinity", "-Infinity", so the core refuses them by name.

func num(v float64) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return v
}

func ms(d time.Duration) any { return float64(d) / 1e6 }

func (b Backoff) spec() map[string]any {
	return map[string]any{"initial_ms": ms(b.Initial), "multiplier": num(b.Multiplier), "max_ms": ms(b.Max),
		"jitter": num(b.Jitter)}
}

func (c BreakerConfig) spec() map[string]any {
	m := map[string]any{
		"open_interval":        c.OpenInterval.spec(),
		"recoveries":           c.Recoveries,
		"max_probes_in_flight": c.MaxProbesInFlight,
		"max_retry_later_ms":   ms(c.MaxRetryLater),
		"seed":                 c.Seed,
	}
	if c.ProbeTimeout != 0 {
		m["probe_timeout_ms"] = ms(c.ProbeTimeout)
	}
	switch t := c.Trip; t.kind {
	case "consecutive":
		m["trip"] = map[string]any{"policy": "consecutive", "threshold": t.threshold}
	case "window":
		m["trip"] = map[string]any{"policy": "window", "threshold": t.threshold, "window_ms": ms(t.window)}
	case "rate":
		trip := map[string]any{"policy": "rate", "threshold": num(t.rate), "min_calls": t.minCalls,
			"window_ms": ms(t.window)}
		if t.buckets != 0 {
			trip["buckets"] = t.buckets
		}
		m["trip"] = trip
	}
	return m
}

func (c BudgetConfig) spec() map[string]any {
	return map[string]any{
		"max_rate_limit_duration_ms": ms(c.MaxRateLimitDuration),
		"retry_after_cap_ms":         ms(c.RetryAfterCap),
		"max_retries":                c.MaxRetries,
		"backoff":                    c.Backoff.spec(),
		"max_backoff_duration_ms":    ms(c.MaxBackoffDuration),
		"give_up_above_cap":          c.GiveUpAboveCap,
		"seed":                       c.Seed,
	}
}

func (c QuotaConfig) spec() map[string]any {
	return map[string]any{"capacity": c.Capacity, "retry_cost": c.RetryCost, "timeout_cost": c.TimeoutCost,
		"success_refill": c.SuccessRefill}
}

func (c ClassifierConfig) spec() map[string]any {
	m := map[string]any{}
	if c.FailureStatuses != nil {
		m["failure_statuses"] = c.FailureStatuses
	}
	if c.AnswerStatuses != nil {
		m["answer_statuses"] = c.AnswerStatuses
	}
	if c.RetryAfterStatuses != nil {
		m["retry_after_statuses"] = c.RetryAfterStatuses
	}
	if c.RateLimitDefaultWait != 0 {
		m["rate_limit_default_wait_ms"] = ms(c.RateLimitDefaultWait)
	}
	return m
}

func parseSpec(spec map[string]any) (*Config, error) {
	text, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return ParseConfig(text)
}

// Config is a configuration in holdoff's neutral JSON format (the format of the conformance
// suite and of `holdoff simulate` scenarios: durations in milliseconds, every part and field
// optional), parsed and validated by the core.
type Config struct {
	h handleRef[*C.holdoff_config]
}

func freeConfig(p *C.holdoff_config) { C.holdoff_config_free(p) }

// ConfigPart is a bit of Config.Parts.
type ConfigPart uint32

// The parts a Config may have.
const (
	PartBreaker    ConfigPart = C.HOLDOFF_CONFIG_BREAKER
	PartBudget     ConfigPart = C.HOLDOFF_CONFIG_BUDGET
	PartQuota      ConfigPart = C.HOLDOFF_CONFIG_QUOTA
	PartClassifier ConfigPart = C.HOLDOFF_CONFIG_CLASSIFIER
	// PartGroup: the configuration bounds breaker groups (group.max_keys).
	PartGroup ConfigPart = C.HOLDOFF_CONFIG_GROUP
	// PartExecute: the configuration has time limits for the retry helpers
	// (Config.ExecuteOptions).
	PartExecute ConfigPart = C.HOLDOFF_CONFIG_EXECUTE
)

// ParseConfig parses and validates a JSON configuration. Errors: an *Error matching
// ErrInvalidConfig whose Field names the first invalid field (breaker.open_interval.initial,
// or config for JSON that does not parse or has an unknown key).
func ParseConfig(text []byte) (*Config, error) {
	ctext := C.CBytes(text)
	defer C.free(ctext)
	var p *C.holdoff_config
	if err := detailed(func() C.holdoff_status {
		return C.holdoff_config_parse((*C.char)(ctext), C.size_t(len(text)), &p)
	}); err != nil {
		return nil, err
	}
	c := &Config{}
	c.h.init(p, "Config", freeConfig)
	c.h.cleanup = runtime.AddCleanup(c, freeConfig, p)
	return c, nil
}

// Close releases the configuration; objects built from it do not need it.
func (c *Config) Close() error {
	c.h.close()
	return nil
}

// Parts says which parts the configuration has.
func (c *Config) Parts() ConfigPart {
	var parts C.uint32_t
	C.holdoff_config_parts(c.h.mustAcquire(), &parts)
	c.h.release()
	return ConfigPart(parts)
}

// NewBreaker builds a closed breaker from the configuration's breaker part (defaults if absent).
func (c *Config) NewBreaker(opts ...Option) (*Breaker, error) {
	h, err := c.h.acquire()
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	var p *C.holdoff_breaker
	err = withClock(opts, func(clock *C.holdoff_clock) error {
		return detailed(func() C.holdoff_status { return C.holdoff_config_new_breaker(h, clock, &p) })
	})
	if err != nil {
		return nil, err
	}
	return wrapBreaker(p, optionsOf(opts).clock), nil
}

// NewBreakerGroup builds a breaker group whose template is the breaker part (defaults if
// absent), bounded by the group part's max_keys (DefaultMaxKeys if absent). The bound comes
// from the configuration only: WithMaxKeys is refused here (an *Error matching
// ErrInvalidConfig, field group.max_keys) rather than ignored.
func (c *Config) NewBreakerGroup(opts ...Option) (*BreakerGroup, error) {
	if optionsOf(opts).hasMaxKeys {
		return nil, &Error{Name: "invalid_config", Field: "group.max_keys",
			Message: "invalid configuration: group.max_keys: set it in the configuration's group part, not with WithMaxKeys",
			status:  C.HOLDOFF_STATUS_INVALID_CONFIG}
	}
	return c.newBreakerGroup(opts)
}

// newBreakerGroup builds the group the configuration describes (the package's
// NewBreakerGroup has put WithMaxKeys's bound in it).
func (c *Config) newBreakerGroup(opts []Option) (*BreakerGroup, error) {
	h, err := c.h.acquire()
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	var p *C.holdoff_group
	err = withClock(opts, func(clock *C.holdoff_clock) error {
		return detailed(func() C.holdoff_status { return C.holdoff_config_new_group(h, clock, &p) })
	})
	if err != nil {
		return nil, err
	}
	return wrapGroup(p, optionsOf(opts).clock), nil
}

// NewRetryBudget builds a retry budget from the budget part (defaults if absent).
func (c *Config) NewRetryBudget(opts ...Option) (*RetryBudget, error) {
	h, err := c.h.acquire()
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	var p *C.holdoff_budget
	err = withClock(opts, func(clock *C.holdoff_clock) error {
		return detailed(func() C.holdoff_status { return C.holdoff_config_new_budget(h, clock, &p) })
	})
	if err != nil {
		return nil, err
	}
	return wrapBudget(p), nil
}

// NewRetryQuota builds a full retry quota from the quota part (defaults if absent).
func (c *Config) NewRetryQuota() (*RetryQuota, error) {
	h, err := c.h.acquire()
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	var p *C.holdoff_quota
	err = detailed(func() C.holdoff_status { return C.holdoff_config_new_quota(h, &p) })
	if err != nil {
		return nil, err
	}
	return wrapQuota(p), nil
}

// NewClassifier builds the classifier part (the default classifier if absent).
func (c *Config) NewClassifier() (*Classifier, error) {
	h, err := c.h.acquire()
	if err != nil {
		return nil, err
	}
	defer c.h.release()
	var p *C.holdoff_classifier
	err = detailed(func() C.holdoff_status { return C.holdoff_config_new_classifier(h, &p) })
	if err != nil {
		return nil, err
	}
	return wrapClassifier(p), nil
}
