package holdoff_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

// The core validates in the milliseconds of its JSON format; a Go caller reads the field's Go
// name and time.Duration values, while Error.Field keeps the core's name.
func TestTypedConfigErrorsSpeakGo(t *testing.T) {
	breaker := func(edit func(*holdoff.BreakerConfig)) error {
		cfg := holdoff.DefaultBreakerConfig()
		edit(&cfg)
		_, err := holdoff.NewBreaker(cfg)
		return err
	}
	budget := func(edit func(*holdoff.BudgetConfig)) error {
		cfg := holdoff.DefaultBudgetConfig()
		edit(&cfg)
		_, err := holdoff.NewRetryBudget(cfg)
		return err
	}
	clock := manualClock(t)
	defer clock.Close()
	policy := func(opts ...holdoff.Option) error {
		_, err := holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), append(opts, holdoff.WithClock(clock))...)
		return err
	}
	_, groupErr := holdoff.NewBreakerGroup(holdoff.DefaultBreakerConfig(), holdoff.WithMaxKeys(0))
	_, quotaErr := holdoff.NewRetryQuota(holdoff.QuotaConfig{Capacity: 0, RetryCost: 5, TimeoutCost: 10})
	_, classifierErr := holdoff.NewClassifier(holdoff.ClassifierConfig{FailureStatuses: []int{403, 700}})
	for _, c := range []struct {
		err          error
		sentinel     error
		field, words string
	}{
		{breaker(func(c *holdoff.BreakerConfig) { c.OpenInterval.Initial = -time.Second }), holdoff.ErrInvalidConfig,
			"breaker.open_interval.initial", "BreakerConfig.OpenInterval.Initial: must not be negative, got -1s"},
		{breaker(func(c *holdoff.BreakerConfig) { c.MaxRetryLater = 0 }), holdoff.ErrInvalidConfig,
			"breaker.max_retry_later", "BreakerConfig.MaxRetryLater: must be greater than 0, got 0s"},
		{breaker(func(c *holdoff.BreakerConfig) { c.ProbeTimeout = -1500 * time.Millisecond }), holdoff.ErrInvalidConfig,
			"breaker.probe_timeout", "BreakerConfig.ProbeTimeout: must not be negative, got -1.5s"},
		{breaker(func(c *holdoff.BreakerConfig) { c.Trip = holdoff.FailureRate(1.5, 10, time.Minute, 0) }),
			holdoff.ErrInvalidConfig, "breaker.trip.threshold",
			"BreakerConfig.Trip (FailureRate rate): must be a rate in (0, 1], got 1.5"},
		{breaker(func(c *holdoff.BreakerConfig) { c.Trip = holdoff.FailuresInWindow(3, -time.Minute) }),
			holdoff.ErrInvalidConfig, "breaker.trip.window",
			"BreakerConfig.Trip (FailuresInWindow window): must not be negative, got -1m0s"},
		{breaker(func(c *holdoff.BreakerConfig) { c.Recoveries = 0 }), holdoff.ErrInvalidConfig,
			"breaker.recoveries", "BreakerConfig.Recoveries: must be between 1 and 1000, got 0"},
		{budget(func(c *holdoff.BudgetConfig) { c.MaxRateLimitDuration = c.RetryAfterCap }), holdoff.ErrInvalidConfig,
			"budget.max_rate_limit_duration", "BudgetConfig.MaxRateLimitDuration: budget 5m0s against a 5m0s cap " +
				"leaves no room to retry: it must be at least twice BudgetConfig.RetryAfterCap (room for two capped " +
				"waits), got 5m0s"},
		{budget(func(c *holdoff.BudgetConfig) { c.Backoff.Max = c.Backoff.Initial / 2 }), holdoff.ErrInvalidConfig,
			"budget.backoff.max", "BudgetConfig.Backoff.Max: must be >= BudgetConfig.Backoff.Initial, got 250ms"},
		{groupErr, holdoff.ErrInvalidConfig, "group.max_keys", "WithMaxKeys: must be between 1 and 100000000, got 0"},
		{quotaErr, holdoff.ErrInvalidConfig, "quota.capacity",
			"QuotaConfig.Capacity: must be between 1 and 1000000000, got 0"},
		{classifierErr, holdoff.ErrInvalidConfig, "classifier.failure_statuses",
			"ClassifierConfig.FailureStatuses: every status must be between 100 and 599, got [403 700]"},
		{policy(holdoff.WithAttemptTimeout(0)), holdoff.ErrInvalidConfig, "execute.attempt_timeout",
			"WithAttemptTimeout: must be greater than 0, got 0s"},
		{policy(holdoff.WithTotalTimeout(-time.Second)), holdoff.ErrInvalidConfig, "execute.total_timeout",
			"WithTotalTimeout: must be greater than 0, got -1s"},
	} {
		errorOf(t, c.words, c.err, c.sentinel, c.field)
		if got, want := c.err.Error(), "holdoff: invalid configuration: "+c.words; got != want {
			t.Errorf("message:\n got %q\nwant %q", got, want)
		}
	}
}

// A configuration written as JSON is in milliseconds: its errors name the JSON's fields and
// unit, as the core words them.
func TestParseConfigErrorsSpeakItsJSON(t *testing.T) {
	_, err := holdoff.ParseConfig([]byte(`{"breaker": {"probe_timeout_ms": -1}}`))
	errorOf(t, "json", err, holdoff.ErrInvalidConfig, "breaker.probe_timeout")
	if want := "holdoff: invalid configuration: breaker.probe_timeout: must not be negative (milliseconds)"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

// A nil receiver or argument is an *Error matching ErrInvalidInput naming it, never a
// nil-pointer panic; methods without an error result panic with that error.
func TestNilIsAnErrorNamingIt(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	p := must(holdoff.NewPolicy(holdoff.DefaultPolicyConfig(), holdoff.WithClock(clock)))
	defer p.Close()
	b := p.Breaker()
	budget := must(holdoff.NewRetryBudget(holdoff.DefaultBudgetConfig(), holdoff.WithClock(clock)))
	defer budget.Close()
	call := p.NewCall()
	defer call.Close()
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	var (
		nb     *holdoff.Breaker
		np     *holdoff.Policy
		ncall  *holdoff.PolicyCall
		nbud   *holdoff.RetryBudget
		nq     *holdoff.RetryQuota
		ncls   *holdoff.Classifier
		ncfg   *holdoff.Config
		ng     *holdoff.BreakerGroup
		nclock *holdoff.ManualClock
		nctx   context.Context
	)
	second := func(_ any, err error) error { return err }
	third := func(_, _ any, err error) error { return err }
	for _, c := range []struct {
		field string
		err   error
	}{
		{"permit", second(b.Record(nil, holdoff.Success))},
		{"breaker", second(nb.Record(nil, holdoff.Success))},
		{"breaker", second(nb.Allow())},
		{"breaker", nb.Do(ctx, ok)},
		{"ctx", b.Do(nctx, ok)},
		{"fn", b.Do(ctx, nil)},
		{"breaker", nb.Close()},
		{"policy", np.Do(ctx, ok)},
		{"ctx", p.Do(nctx, ok)},
		{"fn", p.Do(ctx, nil)},
		{"fn", second(p.DoHTTP(ctx, nil))},
		{"policy", second(np.DoHTTP(ctx, func(context.Context) (*http.Response, error) { return nil, nil }))},
		{"policy", third(np.BeforeAttempt(call))},
		{"call", third(p.BeforeAttempt(nil))},
		{"policy", second(np.AfterAttempt(call, nil, holdoff.Success))},
		{"call", second(p.AfterAttempt(nil, nil, holdoff.Success))},
		{"permit", second(p.AfterAttempt(call, nil, holdoff.Success))},
		{"permit", third(p.AfterResponse(call, nil, 200, nil))},
		{"policy", np.Close()},
		{"call", ncall.Close()},
		{"breaker", second(holdoff.ComposePolicy(nil, budget, nil, nil))},
		{"budget", second(holdoff.ComposePolicy(b, nil, nil, nil))},
		{"clock", second(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(nclock)))},
		{"clock", nclock.Set(time.Second)},
		{"clock", nclock.Advance(time.Second)},
		{"budget", second(nbud.Decide(holdoff.NewRetryState(), holdoff.Failure))},
		{"state", second(budget.Decide(nil, holdoff.Failure))},
		{"quota", nq.OnSuccess(nil)},
		{"classifier", second(ncls.Classify(200, nil, time.Now()))},
		{"config", second(ncfg.NewBreaker())},
		{"config", second(ncfg.ExecuteOptions())},
		{"group", second(ng.Get("a"))},
	} {
		errorOf(t, "nil "+c.field, c.err, holdoff.ErrInvalidInput, c.field)
		if want := "holdoff: invalid input: " + c.field + ": must not be nil"; c.err.Error() != want {
			t.Errorf("got %q, want %q", c.err, want)
		}
	}
	// The breaker admitted nothing for the refused calls: still closed, no permit held.
	if s := b.Snapshot(); s.State != holdoff.Closed || s.Failures != 0 || s.ProbesInFlight != 0 {
		t.Fatalf("nil arguments moved the breaker: %+v", s)
	}
	for field, f := range map[string]func(){
		"breaker": func() { nb.Snapshot() },
		"group":   func() { ng.Len() },
		"quota":   func() { nq.Acquire(false) },
		"clock":   func() { nclock.Now() },
		"call":    func() { ncall.Attempts() },
		"permit":  func() { (*holdoff.Permit)(nil).Episode() },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				errorOf(t, "panic of nil "+field, err, holdoff.ErrInvalidInput, field)
			}()
			f()
		}()
	}
}

// GiveUp is one name for the policy's give-up action and the budget's give-up decision, as in
// the core.
func TestGiveUpIsOneName(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	cfg := holdoff.DefaultPolicyConfig()
	cfg.Breaker.Trip = holdoff.ConsecutiveFailures(1)
	cfg.Budget.MaxRetries = 0
	p := must(holdoff.NewPolicy(cfg, holdoff.WithClock(clock)))
	defer p.Close()
	call := p.NewCall()
	defer call.Close()
	before, permit := must2(p.BeforeAttempt(call))
	if before.Action != holdoff.Go {
		t.Fatalf("first attempt: %+v", before)
	}
	d := must(p.AfterAttempt(call, permit, holdoff.Failure))
	if d.Kind != holdoff.GiveUp || d.Kind.String() != "give_up" || d.Reason != holdoff.AttemptsExhausted {
		t.Fatalf("no retries left: %+v", d)
	}
	// A retry of the same call while the breaker is open and the budget has nothing left.
	before, permit = must2(p.BeforeAttempt(call))
	if before.Action != holdoff.GiveUp || before.Action.String() != "give_up" || permit != nil ||
		before.Reason != holdoff.BreakerOpenReason || !before.HasRetryAfter || before.RetryAfter != 30*time.Second {
		t.Fatalf("open breaker: %+v %v", before, permit)
	}
}

// Go's own argument errors name the Go parameter too.
func TestArgumentErrorsNameTheParameter(t *testing.T) {
	clock := manualClock(t)
	defer clock.Close()
	errorOf(t, "set", clock.Set(-time.Second), holdoff.ErrInvalidInput, "to")
	errorOf(t, "advance", clock.Advance(-time.Second), holdoff.ErrInvalidInput, "by")
	b := must(holdoff.NewBreaker(holdoff.DefaultBreakerConfig(), holdoff.WithClock(clock)))
	defer b.Close()
	permit := must(b.Allow())
	_, err := b.Record(permit, holdoff.RetryLaterOutcome(-time.Second))
	errorOf(t, "negative delay", err, holdoff.ErrInvalidInput, "outcome.delay")
	if want := "holdoff: invalid input: outcome.delay: must not be negative"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}
