package holdoff

// #include <stdlib.h>
// #include "holdoff.h"
import "C"

import (
	"encoding/json"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"
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
	// Fleet, when set, shares this breaker with every worker of the fleet (FleetConfig); nil
	// is a local breaker.
	Fleet *FleetConfig
}

// DefaultBreakerConfig is the core's default: 5 consecutive failures; open 30 s doubling to
// 5 min, no jitter; 3 recoveries; 1 probe; probe timeout = the interval; retry-later guard
// 5 min.
func DefaultBreakerConfig() BreakerConfig {
	d := coreDefaults().Breaker
	return BreakerConfig{
		Trip:              ConsecutiveFailures(d.Trip.Threshold),
		OpenInterval:      d.OpenInterval.backoff(),
		Recoveries:        d.Recoveries,
		MaxProbesInFlight: d.MaxProbesInFlight,
		ProbeTimeout:      fromMs(d.ProbeTimeoutMs),
		MaxRetryLater:     fromMs(d.MaxRetryLaterMs),
		Seed:              d.Seed,
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
	d := coreDefaults().Budget
	return BudgetConfig{
		MaxRateLimitDuration: fromMs(d.MaxRateLimitDurationMs),
		RetryAfterCap:        fromMs(d.RetryAfterCapMs),
		MaxRetries:           d.MaxRetries,
		Backoff:              d.Backoff.backoff(),
		MaxBackoffDuration:   fromMs(d.MaxBackoffDurationMs),
		GiveUpAboveCap:       d.GiveUpAboveCap,
		Seed:                 d.Seed,
	}
}

// QuotaConfig configures a RetryQuota, in tokens. Start from DefaultQuotaConfig.
type QuotaConfig struct {
	Capacity      int `json:"capacity"`
	RetryCost     int `json:"retry_cost"`
	TimeoutCost   int `json:"timeout_cost"`
	SuccessRefill int `json:"success_refill"`
}

// DefaultQuotaConfig is the AWS SDKs' standard mode: 500 tokens, 5 a retry, 10 a retry after
// a timeout, 1 back per success without retry.
func DefaultQuotaConfig() QuotaConfig {
	return coreDefaults().Quota
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

// The neutral JSON format (core/src/interop/config.rs): durations in float milliseconds;
// non-finite floats as the strings "NaN", "Infinity", "-Infinity", so the core refuses them by
// name; null for "none".

// neutralBackoff, neutralBreaker, neutralBudget and neutralConfig read the neutral format as
// the C library writes it with every field (holdoff_config_to_json): the Default* functions
// take the core's defaults from it, so no default is restated in Go.
type neutralBackoff struct {
	InitialMs  float64 `json:"initial_ms"`
	Multiplier float64 `json:"multiplier"`
	MaxMs      float64 `json:"max_ms"`
	Jitter     float64 `json:"jitter"`
}

type neutralBreaker struct {
	Trip struct {
		Threshold int `json:"threshold"`
	} `json:"trip"`
	OpenInterval      neutralBackoff `json:"open_interval"`
	Recoveries        int            `json:"recoveries"`
	MaxProbesInFlight int            `json:"max_probes_in_flight"`
	ProbeTimeoutMs    float64        `json:"probe_timeout_ms"` // null: none (0)
	MaxRetryLaterMs   float64        `json:"max_retry_later_ms"`
	Seed              uint64         `json:"seed"`
}

type neutralBudget struct {
	MaxRateLimitDurationMs float64        `json:"max_rate_limit_duration_ms"`
	RetryAfterCapMs        float64        `json:"retry_after_cap_ms"`
	MaxRetries             int            `json:"max_retries"`
	Backoff                neutralBackoff `json:"backoff"`
	MaxBackoffDurationMs   float64        `json:"max_backoff_duration_ms"`
	GiveUpAboveCap         bool           `json:"give_up_above_cap"`
	Seed                   uint64         `json:"seed"`
}

type neutralConfig struct {
	Breaker neutralBreaker `json:"breaker"`
	Budget  neutralBudget  `json:"budget"`
	Quota   QuotaConfig    `json:"quota"`
}

// coreDefaults is the core's default configuration, written once by the C library. Its
// statuses cannot fail (no configuration, a buffer sized by the first call); a library whose
// text did not parse would be a broken build, so that panics.
var coreDefaults = sync.OnceValue(func() neutralConfig {
	var n C.size_t
	if st := C.holdoff_config_to_json(nil, nil, 0, &n); st != C.HOLDOFF_STATUS_OK {
		panic("holdoff: holdoff_config_to_json: " + statusName(st))
	}
	buf := make([]byte, int(n)+1)
	if st := C.holdoff_config_to_json(nil, (*C.char)(unsafe.Pointer(&buf[0])), n+1, &n); st != C.HOLDOFF_STATUS_OK {
		panic("holdoff: holdoff_config_to_json: " + statusName(st))
	}
	var d neutralConfig
	if err := json.Unmarshal(buf[:n], &d); err != nil {
		panic("holdoff: the library's default configuration does not parse: " + err.Error())
	}
	return d
})

func (b neutralBackoff) backoff() Backoff {
	return Backoff{Initial: fromMs(b.InitialMs), Multiplier: b.Multiplier, Max: fromMs(b.MaxMs), Jitter: b.Jitter}
}

// fromMs is a neutral-format duration (float milliseconds) as a time.Duration.
func fromMs(ms float64) time.Duration { return time.Duration(math.Round(ms * 1e6)) }

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

// parseSpec parses a configuration the typed constructors built; its errors speak Go
// (inGoTerms).
func parseSpec(spec map[string]any) (*Config, error) {
	text, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(text)
	return c, inGoTerms(err, spec)
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
	// partFleet: the configuration attaches its breakers to a fleet.
	partFleet ConfigPart = C.HOLDOFF_CONFIG_FLEET
)

// ParseConfig parses and validates a JSON configuration. Errors: an *Error matching
// ErrInvalidConfig whose Field names the first invalid field (breaker.open_interval.initial,
// or config for JSON that does not parse or has an unknown key).
func ParseConfig(text []byte) (*Config, error) {
	p, err := parseConfigHandle(text)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	c.h.init(p, &kindConfig)
	c.h.cleanup = runtime.AddCleanup(c, freeConfig, p)
	return c, nil
}

// parseConfigHandle is ParseConfig's handle, owned by the caller.
func parseConfigHandle(text []byte) (*C.holdoff_config, error) {
	ctext := C.CBytes(text)
	defer C.free(ctext)
	var p *C.holdoff_config
	if err := detailed(func() C.holdoff_status {
		return C.holdoff_config_parse((*C.char)(ctext), C.size_t(len(text)), &p)
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Close releases the configuration; objects built from it do not need it.
func (c *Config) Close() error {
	if c == nil {
		return nilErr("config")
	}
	c.h.close()
	return nil
}

// Parts says which parts the configuration has.
func (c *Config) Parts() ConfigPart {
	if c == nil {
		nilPanic("config")
	}
	var parts C.uint32_t
	C.holdoff_config_parts(c.h.mustAcquire(), &parts)
	c.h.release()
	return ConfigPart(parts)
}

// use runs f on the configuration's handle, held for the call. Errors: Field "config" for a
// nil c, ErrClosed after Close, or f's error.
func (c *Config) use(f func(h *C.holdoff_config) error) error {
	if c == nil {
		return nilErr("config")
	}
	h, err := c.h.acquire()
	if err != nil {
		return err
	}
	defer c.h.release()
	return f(h)
}

// call runs the C call f on the configuration's handle; its error carries the core's detail.
func (c *Config) call(f func(h *C.holdoff_config) C.holdoff_status) error {
	return c.use(func(h *C.holdoff_config) error {
		return detailed(func() C.holdoff_status { return f(h) })
	})
}

// callWithClock is call with the clock the options name (see withClock).
func (c *Config) callWithClock(opts []Option, f func(h *C.holdoff_config, clock *C.holdoff_clock) C.holdoff_status) error {
	return c.use(func(h *C.holdoff_config) error {
		return withClock(opts, func(clock *C.holdoff_clock) error {
			return detailed(func() C.holdoff_status { return f(h, clock) })
		})
	})
}

// NewBreaker builds a closed breaker from the configuration's breaker part (defaults if absent).
func (c *Config) NewBreaker(opts ...Option) (*Breaker, error) {
	var b *Breaker
	err := c.use(func(h *C.holdoff_config) (err error) {
		b, err = newBreaker(h, opts)
		return err
	})
	return b, err
}

// newBreaker builds a breaker from the configuration handle h, which the caller holds.
func newBreaker(h *C.holdoff_config, opts []Option) (*Breaker, error) {
	var p *C.holdoff_breaker
	var err error
	clock := breakerClock()
	shared := clock != nil && clockOf(opts) == nil
	if shared {
		err = detailed(func() C.holdoff_status { return C.holdoff_breaker_new(h, clock, &p) })
	} else {
		err = withClock(opts, func(clock *C.holdoff_clock) error {
			return detailed(func() C.holdoff_status { return C.holdoff_breaker_new(h, clock, &p) })
		})
	}
	if err != nil {
		return nil, err
	}
	var parts C.uint32_t
	C.holdoff_config_parts(h, &parts)
	// A fleet's breaker reads no fast-path word: Close must free it at once (see wrapBreaker).
	return wrapBreaker(p, ConfigPart(parts)&partFleet == 0, shared && breakerClockMapped), nil
}

// NewBreakerGroup builds a breaker group whose template is the breaker part (defaults if
// absent), bounded by the group part's max_keys (DefaultMaxKeys if absent). The bound comes
// from the configuration only: WithMaxKeys is refused here (an *Error matching
// ErrInvalidConfig, field group.max_keys) rather than ignored.
func (c *Config) NewBreakerGroup(opts ...Option) (*BreakerGroup, error) {
	if c == nil {
		return nil, nilErr("config")
	}
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
	var p *C.holdoff_breaker_group
	err := c.callWithClock(opts, func(h *C.holdoff_config, clock *C.holdoff_clock) C.holdoff_status {
		return C.holdoff_breaker_group_new(h, clock, &p)
	})
	if err != nil {
		return nil, err
	}
	return wrapGroup(p), nil
}

// NewRetryBudget builds a retry budget from the budget part (defaults if absent).
func (c *Config) NewRetryBudget(opts ...Option) (*RetryBudget, error) {
	var p *C.holdoff_retry_budget
	err := c.callWithClock(opts, func(h *C.holdoff_config, clock *C.holdoff_clock) C.holdoff_status {
		return C.holdoff_retry_budget_new(h, clock, &p)
	})
	if err != nil {
		return nil, err
	}
	return wrapBudget(p, optionsOf(opts).clock), nil
}

// NewRetryQuota builds a full retry quota from the quota part (defaults if absent).
func (c *Config) NewRetryQuota() (*RetryQuota, error) {
	var p *C.holdoff_retry_quota
	if err := c.call(func(h *C.holdoff_config) C.holdoff_status { return C.holdoff_retry_quota_new(h, &p) }); err != nil {
		return nil, err
	}
	return wrapQuota(p), nil
}

// NewClassifier builds the classifier part (the default classifier if absent).
func (c *Config) NewClassifier() (*Classifier, error) {
	var p *C.holdoff_classifier
	if err := c.call(func(h *C.holdoff_config) C.holdoff_status { return C.holdoff_classifier_new(h, &p) }); err != nil {
		return nil, err
	}
	return wrapClassifier(p), nil
}

var kindConfig = handleKind[*C.holdoff_config]{"Config", freeConfig}
