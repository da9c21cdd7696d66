package holdoff_test

// The conformance runner: every case of conformance/cases through the package's public API,
// one subtest per case, following conformance/README.md (mirrors core/tests/conformance.rs);
// a case with an execute step runs once per helper flavour, `<id> [Do]` and `<id> [DoHTTP]`
// (conformance_execute_test.go). HOLDOFF_CASES=substring runs only the matching case ids.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	holdoff "holdoff.dev/go"
)

const suiteVersion = 4

// conformanceDir is the suite: HOLDOFF_CONFORMANCE_DIR when set (a module installed with go get
// has no suite beside it), else the repository's.
var conformanceDir = func() string {
	if dir := os.Getenv("HOLDOFF_CONFORMANCE_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "conformance")
}()

type obj = map[string]any

// Numbers stay json.Number (exact); compare them as float64, as the reference runner does.
func norm(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = norm(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	}
	return v
}

func msOf(d time.Duration) any {
	if d%time.Millisecond == 0 {
		return float64(d / time.Millisecond)
	}
	return float64(d) / 1e6
}

func optMs(d time.Duration, ok bool) any {
	if !ok {
		return nil
	}
	return msOf(d)
}

func check(expect any, actual obj, known ...string) error {
	if expect == nil {
		return nil
	}
	want, ok := expect.(map[string]any)
	if !ok {
		return fmt.Errorf("expect must be an object")
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		found := false
		for _, kk := range known {
			found = found || kk == k
		}
		if !found {
			return fmt.Errorf("unknown expect key %q", k)
		}
		w, g := norm(want[k]), norm(actual[k])
		if !reflect.DeepEqual(w, g) {
			all, _ := json.Marshal(actual)
			return fmt.Errorf("%s: expected %v, got %v  (all: %s)", k, w, g, all)
		}
	}
	return nil
}

func i64(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	return i, err == nil
}

func u64(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	return u, err == nil
}

func str(m obj, k, dflt string) string {
	if s, ok := m[k].(string); ok {
		return s
	}
	return dflt
}

func outcomeOf(v any) (holdoff.Outcome, error) {
	switch x := v.(type) {
	case string:
		switch x {
		case "success":
			return holdoff.Success, nil
		case "answer":
			return holdoff.Answer, nil
		case "failure":
			return holdoff.Failure, nil
		case "timeout":
			return holdoff.Timeout, nil
		case "cancelled":
			return holdoff.Cancelled, nil
		}
		return holdoff.Outcome{}, fmt.Errorf("unknown outcome %q", x)
	case map[string]any:
		if ms, ok := u64(x["retry_later_ms"]); ok {
			return holdoff.RetryLaterOutcome(time.Duration(ms) * time.Millisecond), nil
		}
	}
	return holdoff.Outcome{}, fmt.Errorf("bad outcome %v", v)
}

func errName(err error) string {
	if e, ok := err.(*holdoff.Error); ok {
		return e.Name
	}
	return "unknown: " + err.Error()
}

func decisionObj(d holdoff.Decision) obj {
	a := obj{"decision": d.Kind.String()}
	switch d.Kind {
	case holdoff.Retry:
		a["delay_ms"] = msOf(d.Delay)
		a["source"] = d.Source.String()
		a["server_delay_ms"] = optMs(d.ServerDelay, d.HasServerDelay)
		a["capped"] = d.Capped
	case holdoff.GiveUp:
		a["reason"] = d.Reason.String()
		a["server_delay_ms"] = optMs(d.ServerDelay, d.HasServerDelay)
	}
	return a
}

func headersOf(step obj) ([]holdoff.Header, error) {
	list, ok := step["headers"]
	if !ok {
		return nil, nil
	}
	arr, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("headers must be an array")
	}
	var hs []holdoff.Header
	for _, p := range arr {
		pair, ok := p.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("bad header %v", p)
		}
		n, ok1 := pair[0].(string)
		v, ok2 := pair[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("bad header %v", p)
		}
		hs = append(hs, holdoff.Header{Name: n, Value: v})
	}
	return hs, nil
}

// namedPermit keeps a permit with the breaker object that admitted it, as user code does: it
// is recorded there, not on whatever the group holds for its key by then.
type namedPermit struct {
	permit  *holdoff.Permit
	breaker *holdoff.Breaker
}

type ctx struct {
	clock       *holdoff.ManualClock
	config      *holdoff.Config
	breaker     *holdoff.Breaker
	group       *holdoff.BreakerGroup
	budget      *holdoff.RetryBudget
	quota       *holdoff.RetryQuota
	classifier  *holdoff.Classifier
	policy      *holdoff.Policy
	permits     map[string]namedPermit
	states      map[string]*holdoff.RetryState
	policyCalls map[string]*holdoff.PolicyCall
	leases      map[string]*holdoff.QuotaLease
	// fromGroup are the breakers the group handed out, closed with the case.
	fromGroup []*holdoff.Breaker
	// flavour is the helper flavour of this run (flavourDo, flavourDoHTTP; "" without an
	// execute step).
	flavour string
	// borrowed: a fleet case's later worker, whose clock and configuration are the first's.
	borrowed bool
}

func (c *ctx) close() {
	for _, b := range c.fromGroup {
		b.Close()
	}
	for _, s := range c.states {
		s.Close()
	}
	for _, p := range c.policyCalls {
		p.Close()
	}
	closers := []interface{ Close() error }{c.policy, c.classifier, c.quota, c.budget, c.group, c.breaker}
	if !c.borrowed {
		closers = append(closers, c.config, c.clock)
	}
	for _, x := range closers {
		if !reflect.ValueOf(x).IsNil() {
			x.Close()
		}
	}
}

// build builds one worker's objects: the first worker (first nil) parses the configuration and
// makes the manual clock, every later worker of a fleet case builds from the same two.
func build(cs obj, first *ctx) (*ctx, error) {
	c := &ctx{permits: map[string]namedPermit{}, states: map[string]*holdoff.RetryState{},
		policyCalls: map[string]*holdoff.PolicyCall{}, leases: map[string]*holdoff.QuotaLease{}}
	var err error
	if first != nil {
		c.config, c.clock, c.borrowed = first.config, first.clock, true
	} else {
		cfg, ok := cs["config"]
		if !ok {
			cfg = obj{}
		}
		text, err := json.Marshal(cfg)
		if err != nil {
			return c, err
		}
		if c.config, err = holdoff.ParseConfig(text); err != nil {
			return c, err
		}
		var origin uint64
		if clk, ok := cs["clock"].(map[string]any); ok {
			origin, _ = u64(clk["wall_origin_unix_ms"])
		}
		if c.clock, err = holdoff.NewManualClock(time.UnixMilli(int64(origin))); err != nil {
			return c, err
		}
	}
	clock := holdoff.WithClock(c.clock)
	parts := c.config.Parts()
	if parts&holdoff.PartBreaker != 0 {
		if cs["group"] == true {
			c.group, err = c.config.NewBreakerGroup(clock)
		} else {
			c.breaker, err = c.config.NewBreaker(clock)
		}
		if err != nil {
			return c, err
		}
	}
	if parts&holdoff.PartBudget != 0 {
		if c.budget, err = c.config.NewRetryBudget(clock); err != nil {
			return c, err
		}
	}
	if parts&holdoff.PartQuota != 0 {
		if c.quota, err = c.config.NewRetryQuota(); err != nil {
			return c, err
		}
	}
	if c.classifier, err = c.config.NewClassifier(); err != nil {
		return c, err
	}
	if cs["policy"] == true {
		if c.breaker == nil || c.budget == nil {
			return c, fmt.Errorf("a policy case needs a breaker and a budget")
		}
		if c.policy, err = holdoff.ComposePolicy(c.breaker, c.budget, c.quota, c.classifier); err != nil {
			return c, err
		}
	}
	// Counting starts at an object's first read of its metrics: read each once now, so the
	// metrics steps count the whole case.
	for _, of := range []string{"breaker", "group", "quota", "policy"} {
		if _, err := c.readings(of); err != nil && !errors.Is(err, errNoObject) {
			return c, err
		}
	}
	return c, nil
}

// errNoObject: the case did not build the object a metrics step reads.
var errNoObject = errors.New("the case has no such object")

// readings reads the metrics of the case's breaker (in a policy case the policy's), policy
// (its retry series), quota or group.
func (c *ctx) readings(of string) ([]holdoff.MetricReading, error) {
	switch {
	case of == "breaker" && c.breaker != nil:
		return c.breaker.Metrics()
	case of == "policy" && c.policy != nil:
		return c.policy.Metrics()
	case of == "quota" && c.quota != nil:
		return c.quota.Metrics()
	case of == "group" && c.group != nil:
		return c.group.Metrics()
	case of == "breaker", of == "policy", of == "quota", of == "group":
		return nil, fmt.Errorf("metrics of %s: %w", of, errNoObject)
	}
	return nil, fmt.Errorf("metrics of %q: breaker, policy, quota or group", of)
}

// metrics compares the object's series, zeros dropped, with expect.series: the same series,
// each value within 1e-9.
func (c *ctx) metrics(step obj) error {
	readings, err := c.readings(str(step, "of", ""))
	if err != nil {
		return err
	}
	expect, ok := step["expect"].(map[string]any)
	if !ok {
		return check(step["expect"], obj{})
	}
	for k := range expect {
		if k != "series" {
			return fmt.Errorf("unknown expect key %q", k)
		}
	}
	want, ok := expect["series"].(map[string]any)
	if !ok {
		return fmt.Errorf("series must be an object")
	}
	got := map[string]float64{}
	for _, r := range readings {
		if r.Value != 0 {
			got[r.Series()] = r.Value
		}
	}
	var wrong []string
	for k, v := range want {
		w, ok := norm(v).(float64)
		if !ok {
			return fmt.Errorf("series %s: not a number", k)
		}
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			wrong = append(wrong, fmt.Sprintf("%s: expected %v, got %v", k, w, g))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s: expected 0, got %v", k, g))
		}
	}
	if len(wrong) > 0 {
		sort.Strings(wrong)
		return fmt.Errorf("metrics of %s: %s", str(step, "of", ""), strings.Join(wrong, "; "))
	}
	return nil
}

// breakerFor asks the group once for the breaker of the step's key (which marks it most
// recently used, and may evict or overflow), or gives the case's breaker.
func (c *ctx) breakerFor(key *string) (*holdoff.Breaker, error) {
	if key != nil {
		if c.group == nil {
			return nil, fmt.Errorf("step names a key but the case has no group")
		}
		b, err := c.group.Get(*key)
		if err != nil {
			return nil, err
		}
		c.fromGroup = append(c.fromGroup, b)
		return b, nil
	}
	if c.breaker == nil {
		return nil, fmt.Errorf("the case has no breaker")
	}
	return c.breaker, nil
}

func keyOf(step obj) *string {
	if k, ok := step["key"].(string); ok {
		return &k
	}
	return nil
}

func (c *ctx) allow(step obj, a obj) (bool, error) {
	b, err := c.breakerFor(keyOf(step))
	if err != nil {
		return false, err
	}
	if onlyAdmission(step["expect"]) {
		return c.tryAllow(step, b, a)
	}
	p, err := b.Allow()
	if err != nil {
		open, ok := err.(*holdoff.BreakerOpenError)
		if !ok {
			return false, err
		}
		a["admitted"] = false
		a["retry_after_ms"] = optMs(open.RetryAfter, open.HasRetryAfter)
		a["state"] = open.State.String()
		return false, nil
	}
	a["admitted"] = true
	a["episode"] = p.Episode()
	a["probe"] = p.IsProbe()
	c.permits[str(step, "as", "_last")] = namedPermit{p, b}
	return true, nil
}

// onlyAdmission reports whether a step's expect checks nothing that only a refusal's error
// carries (retry_after_ms, state): such a step asks through TryAllow, so that the cases run
// through both ways of asking.
func onlyAdmission(expect any) bool {
	want, ok := expect.(map[string]any)
	if !ok {
		return false
	}
	_, retryAfter := want["retry_after_ms"]
	_, state := want["state"]
	return !retryAfter && !state
}

// tryAllow is allow through TryAllow; a false from a breaker that cannot admit (Err) is the
// step's error, not a refusal.
func (c *ctx) tryAllow(step obj, b *holdoff.Breaker, a obj) (bool, error) {
	p, ok := b.TryAllow()
	if !ok {
		if err := b.Err(); err != nil {
			return false, err
		}
		a["admitted"] = false
		return false, nil
	}
	a["admitted"] = true
	a["episode"] = p.Episode()
	a["probe"] = p.IsProbe()
	c.permits[str(step, "as", "_last")] = namedPermit{&p, b}
	return true, nil
}

func (c *ctx) record(name string, o holdoff.Outcome, a obj) error {
	np, ok := c.permits[name]
	if !ok {
		return fmt.Errorf("no permit named %q", name)
	}
	effect, err := np.breaker.Record(np.permit, o)
	if err != nil {
		a["error"] = errName(err)
	} else {
		a["effect"] = effect.String()
	}
	return nil
}

func (c *ctx) step(step obj) error {
	op := str(step, "op", "")
	expect := step["expect"]
	callName := str(step, "call", "default")
	a := obj{}
	switch op {
	case "allow":
		if _, err := c.allow(step, a); err != nil {
			return err
		}
		return check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state")
	case "record":
		name, ok := step["permit"].(string)
		if !ok {
			return fmt.Errorf("record needs permit")
		}
		o, err := outcomeOf(step["outcome"])
		if err != nil {
			return err
		}
		if err := c.record(name, o, a); err != nil {
			return err
		}
		return check(expect, a, "effect", "error")
	case "call":
		o, err := outcomeOf(step["outcome"])
		if err != nil {
			return err
		}
		admitted, err := c.allow(step, a)
		if err != nil {
			return err
		}
		if admitted {
			if err := c.record(str(step, "as", "_last"), o, a); err != nil {
				return err
			}
		}
		return check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state", "effect")
	case "record_foreign":
		np, ok := c.permits[str(step, "permit", "")]
		if !ok {
			return fmt.Errorf("no permit named %q", str(step, "permit", ""))
		}
		other, err := c.config.NewBreaker(holdoff.WithClock(c.clock))
		if err != nil {
			return err
		}
		defer other.Close()
		if _, err := other.Record(np.permit, holdoff.Success); err != nil {
			a["error"] = errName(err)
		} else {
			a["effect"] = "counted"
		}
		return check(expect, a, "error", "effect")
	case "snapshot":
		b, err := c.breakerFor(keyOf(step))
		if err != nil {
			return err
		}
		s := b.Snapshot()
		a = obj{"state": s.State.String(), "episode": s.Episode, "failures": s.Failures,
			"recoveries": s.Recoveries, "probes_in_flight": s.ProbesInFlight,
			"retry_after_ms": optMs(s.RetryAfter, s.HasRetryAfter), "probe_ready": s.ProbeReady,
			"interval_ms": optMs(s.Interval, s.HasInterval), "opens": s.Opens, "closes": s.Closes,
			"probes": s.Probes, "refusals": s.Refusals, "stale_answers": s.StaleAnswers}
		return check(expect, a, "state", "episode", "failures", "recoveries", "probes_in_flight",
			"retry_after_ms", "probe_ready", "interval_ms", "opens", "closes", "probes", "refusals",
			"stale_answers")
	case "events":
		b, err := c.breakerFor(keyOf(step))
		if err != nil {
			return err
		}
		var got []obj
		for _, e := range b.DrainEvents() {
			got = append(got, obj{"at": float64(e.At / time.Millisecond), "from": e.From.String(),
				"to": e.To.String(), "episode": e.Episode, "reason": e.Reason.String(),
				"requested_delay_ms": optMs(e.RequestedDelay, e.HasRequestedDelay),
				"open_for_ms":        optMs(e.OpenFor, e.HasOpenFor)})
		}
		want, ok := expect.([]any)
		if !ok {
			return fmt.Errorf("events expects an array")
		}
		if len(want) != len(got) {
			all, _ := json.Marshal(got)
			return fmt.Errorf("expected %d events, got %d: %s", len(want), len(got), all)
		}
		for i := range want {
			if err := check(want[i], got[i], "at", "from", "to", "episode", "reason", "requested_delay_ms",
				"open_for_ms"); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
		}
		return nil
	case "force_open", "disable", "reset":
		b, err := c.breakerFor(keyOf(step))
		if err != nil {
			return err
		}
		map[string]func(){"force_open": b.ForceOpen, "disable": b.Disable, "reset": b.Reset}[op]()
		return check(expect, a)
	case "clock_set":
		to, ok := u64(step["to_ms"])
		if !ok {
			return fmt.Errorf("clock_set needs to_ms")
		}
		if err := c.clock.Set(time.Duration(to) * time.Millisecond); err != nil {
			a["error"] = errName(err)
		}
		return check(expect, a, "error")
	case "clock_advance":
		by, ok := u64(step["by_ms"])
		if !ok {
			return fmt.Errorf("clock_advance needs by_ms")
		}
		// A jump past time.Duration's range is made in parts: the clock saturates at the end of
		// its axis (conformance/README.md).
		const part = uint64(math.MaxInt64 / int64(time.Millisecond))
		for ; by > part; by -= part {
			if err := c.clock.Advance(time.Duration(part) * time.Millisecond); err != nil {
				return err
			}
		}
		if err := c.clock.Advance(time.Duration(by) * time.Millisecond); err != nil {
			return err
		}
		return check(expect, a)
	case "decide":
		o, err := outcomeOf(step["outcome"])
		if err != nil {
			return err
		}
		if c.budget == nil {
			return fmt.Errorf("the case has no budget")
		}
		s, ok := c.states[callName]
		if !ok {
			s = holdoff.NewRetryState()
			c.states[callName] = s
		}
		d, err := c.budget.Decide(s, o)
		if err != nil {
			return err
		}
		return check(expect, decisionObj(d), "decision", "delay_ms", "source", "server_delay_ms", "capped", "reason")
	case "budget_state":
		if c.budget == nil {
			return fmt.Errorf("the case has no budget")
		}
		start, active := c.budget.Episode()
		a["episode_active"] = active
		a["episode_start_ms"] = nil
		if active {
			a["episode_start_ms"] = float64(start / time.Millisecond)
		}
		a["retries"] = 0
		if s, ok := c.states[callName]; ok {
			a["retries"] = s.Retries()
		}
		return check(expect, a, "episode_active", "episode_start_ms", "retries")
	case "parse_retry_after":
		v, ok := step["value"].(string)
		if !ok {
			return fmt.Errorf("parse_retry_after needs value")
		}
		h, err := holdoff.ParseRetryAfter(v, c.clock.WallNow())
		if err != nil {
			return err
		}
		hintObj(h, a)
		return check(expect, a, "delay_ms", "unusable")
	case "hint":
		hs, err := headersOf(step)
		if err != nil {
			return err
		}
		h, err := holdoff.HintFromHeaders(hs, c.clock.WallNow())
		if err != nil {
			return err
		}
		hintObj(h, a)
		a["source"] = h.Source.String()
		return check(expect, a, "delay_ms", "unusable", "source")
	case "classify":
		hs, err := headersOf(step)
		if err != nil {
			return err
		}
		status, ok := i64(step["status"])
		if !ok {
			return fmt.Errorf("classify needs an integer status")
		}
		cl, err := c.classifier.Classify(int(status), hs, c.clock.WallNow())
		if err != nil {
			a["error"] = errName(err)
		} else {
			a["outcome"] = cl.Outcome.Kind.String()
			a["retry_later_ms"] = nil
			if cl.Outcome.Kind == holdoff.KindRetryLater {
				a["retry_later_ms"] = msOf(cl.Outcome.Delay)
			}
		}
		return check(expect, a, "outcome", "retry_later_ms", "error")
	case "quota_acquire":
		if c.quota == nil {
			return fmt.Errorf("the case has no quota")
		}
		l := c.quota.Acquire(step["timeout"] == true)
		a["acquired"] = l.Acquired()
		a["cost"] = l.Cost()
		if name, ok := step["as"].(string); ok && l.Acquired() {
			c.leases[name] = l
		}
		a["available"] = c.quota.Available()
		return check(expect, a, "acquired", "cost", "available")
	case "quota_success":
		if c.quota == nil {
			return fmt.Errorf("the case has no quota")
		}
		q := c.quota
		if step["foreign"] == true {
			other, err := c.config.NewRetryQuota()
			if err != nil {
				return err
			}
			defer other.Close()
			q = other
		}
		var lease *holdoff.QuotaLease
		if name, ok := step["lease"].(string); ok {
			if lease, ok = c.leases[name]; !ok {
				return fmt.Errorf("no lease named %q", name)
			}
		}
		if err := q.OnSuccess(lease); err != nil {
			a["error"] = errName(err)
		}
		a["available"] = c.quota.Available()
		return check(expect, a, "available", "error")
	case "group_snapshot":
		if c.group == nil {
			return fmt.Errorf("the case has no group")
		}
		s := c.group.Snapshot()
		keys := []any{}
		for _, k := range c.group.Keys() {
			keys = append(keys, k)
		}
		a = obj{"keys": keys, "max_keys": s.MaxKeys, "evictions": s.Evictions, "overflows": s.Overflows}
		return check(expect, a, "keys", "max_keys", "evictions", "overflows")
	case "before":
		if c.policy == nil {
			return fmt.Errorf("the case has no policy")
		}
		call := c.policyCall(callName)
		b, permit, err := c.policy.BeforeAttempt(call)
		if err != nil {
			return err
		}
		a["action"] = b.Action.String()
		switch b.Action {
		case holdoff.Go:
			a["episode"] = permit.Episode()
			a["probe"] = permit.IsProbe()
			c.permits[str(step, "as", "_last")] = namedPermit{permit, c.policy.Breaker()}
		case holdoff.Wait:
			a["delay_ms"] = msOf(b.Delay)
		default:
			a["reason"] = b.Reason.String()
			a["retry_after_ms"] = optMs(b.RetryAfter, b.HasRetryAfter)
		}
		return check(expect, a, "action", "episode", "probe", "delay_ms", "reason", "retry_after_ms")
	case "after":
		if c.policy == nil {
			return fmt.Errorf("the case has no policy")
		}
		name := str(step, "permit", "_last")
		np, ok := c.permits[name]
		if !ok {
			return fmt.Errorf("no permit named %q", name)
		}
		call := c.policyCall(callName)
		if status, ok := i64(step["status"]); ok {
			hs, err := headersOf(step)
			if err != nil {
				return err
			}
			d, cl, err := c.policy.AfterResponse(call, np.permit, int(status), hs)
			if err != nil {
				a["error"] = errName(err)
			} else {
				a = decisionObj(d)
				a["outcome"] = cl.Outcome.Kind.String()
			}
		} else {
			o, err := outcomeOf(step["outcome"])
			if err != nil {
				return err
			}
			d, err := c.policy.AfterAttempt(call, np.permit, o)
			if err != nil {
				a["error"] = errName(err)
			} else {
				a = decisionObj(d)
			}
		}
		return check(expect, a, "decision", "delay_ms", "source", "server_delay_ms", "capped", "reason", "error",
			"outcome")
	case "metrics":
		return c.metrics(step)
	case "execute":
		if c.flavour == "" {
			return fmt.Errorf("an execute step outside a flavour's run")
		}
		return c.execute(step, c.flavour)
	}
	return fmt.Errorf("unknown op %q", op)
}

func (c *ctx) policyCall(name string) *holdoff.PolicyCall {
	call, ok := c.policyCalls[name]
	if !ok {
		call = c.policy.NewCall()
		c.policyCalls[name] = call
	}
	return call
}

func hintObj(h holdoff.Hint, a obj) {
	if h.Unusable == holdoff.Usable {
		a["delay_ms"] = msOf(h.Delay)
	} else {
		a["unusable"] = h.Unusable.String()
	}
}

// memoryStore is the store name of the case's memory://<name> fleet url ("" for none).
func memoryStore(cs obj) string {
	cfg, _ := cs["config"].(map[string]any)
	fleet, _ := cfg["fleet"].(map[string]any)
	url, _ := fleet["url"].(string)
	name, ok := strings.CutPrefix(url, "memory://")
	if !ok {
		return ""
	}
	return name
}

// buildWorkers builds the case's `workers` (default 1) from one configuration on one clock,
// after resetting the case's memory store (names are reused between runs of one process).
func buildWorkers(cs obj) ([]*ctx, error) {
	n, ok := u64(cs["workers"])
	if !ok || n < 1 {
		n = 1
	}
	if name := memoryStore(cs); name != "" {
		if err := holdoff.MemoryStoreControl(name, holdoff.StoreReset); err != nil {
			return nil, err
		}
	}
	var workers []*ctx
	for i := uint64(0); i < n; i++ {
		var first *ctx
		if i > 0 {
			first = workers[0]
		}
		c, err := build(cs, first)
		workers = append(workers, c)
		if err != nil {
			return workers, err
		}
	}
	return workers, nil
}

var fleetStoreActions = map[string]holdoff.MemoryStoreAction{"down": holdoff.StoreDown, "up": holdoff.StoreUp,
	"flush": holdoff.StoreFlush}

// fleetSync ticks one worker's fleet and compares its report with expect.
func (c *ctx) fleetSync(expect any) error {
	if c.breaker == nil {
		return fmt.Errorf("the case has no breaker")
	}
	r, err := c.breaker.SyncFleet()
	if err != nil {
		return err
	}
	a := obj{"ok": r.OK, "attached": r.Attached, "granted": r.Granted}
	if r.OK && r.HasRecord {
		a["fleet_state"], a["fleet_episode"], a["fleet_recoveries"] = r.State.String(), r.Episode, r.Recoveries
	}
	return check(expect, a, "ok", "attached", "granted", "fleet_state", "fleet_episode", "fleet_recoveries")
}

// caseStep runs a step on the worker it names (`worker`, default 0); a fleet_sync without
// one ticks every worker in order, and fleet_store acts on the case's memory store.
func caseStep(cs obj, workers []*ctx, step obj) error {
	i, named := u64(step["worker"])
	if _, has := step["worker"]; has && (!named || i >= uint64(len(workers))) {
		return fmt.Errorf("no worker %v (the case has %d)", step["worker"], len(workers))
	}
	switch str(step, "op", "") {
	case "fleet_store":
		action, ok := fleetStoreActions[str(step, "action", "")]
		if !ok || memoryStore(cs) == "" {
			return fmt.Errorf("fleet_store needs a memory:// fleet and down, up or flush")
		}
		if err := holdoff.MemoryStoreControl(memoryStore(cs), action); err != nil {
			return err
		}
		return check(step["expect"], obj{})
	case "fleet_sync":
		from, to := 0, len(workers)-1
		if named {
			from, to = int(i), int(i)
		}
		for j := from; j <= to; j++ {
			if err := workers[j].fleetSync(step["expect"]); err != nil {
				return fmt.Errorf("worker %d: %w", j, err)
			}
		}
		return nil
	}
	return workers[i].step(step)
}

func runCase(cs obj, flavour string) error {
	workers, err := buildWorkers(cs)
	defer func() {
		// Later workers first: the first owns the shared clock and configuration.
		for i := len(workers) - 1; i >= 0; i-- {
			workers[i].close()
		}
	}()
	for _, c := range workers {
		c.flavour = flavour
	}
	expectErr, wantErr := cs["expect_error"]
	switch {
	case err != nil && wantErr:
		a := obj{"error": errName(err)}
		if e, ok := err.(*holdoff.Error); ok && e.Name == "invalid_config" {
			a["field"] = e.Field
		}
		return check(expectErr, a, "error", "field")
	case err != nil:
		return fmt.Errorf("configuration refused: %v", err)
	case wantErr:
		return fmt.Errorf("expected configuration error %v, but it built", expectErr)
	}
	clock := workers[0].clock
	steps, ok := cs["steps"].([]any)
	if !ok {
		return fmt.Errorf("case without steps")
	}
	for i, s := range steps {
		step := s.(map[string]any)
		repeat, ok := u64(step["repeat"])
		if !ok {
			repeat = 1
		}
		every, _ := u64(step["every_ms"])
		at, hasAt := u64(step["at"])
		for r := uint64(0); r < repeat; r++ {
			if hasAt {
				t := at + r*every
				if err := clock.Set(time.Duration(t) * time.Millisecond); err != nil {
					return fmt.Errorf("step %d: clock cannot move to %d: %v", i, t, err)
				}
			}
			if err := caseStep(cs, workers, step); err != nil {
				rep := ""
				if repeat > 1 {
					rep = fmt.Sprintf(" (repetition %d)", r)
				}
				return fmt.Errorf("step %d %s at %d%s: %v", i, str(step, "op", "?"),
					clock.Now()/time.Millisecond, rep, err)
			}
		}
	}
	return nil
}

func loadCases(t *testing.T) []obj {
	t.Helper()
	if _, err := os.Stat(conformanceDir); err != nil && os.Getenv("HOLDOFF_CONFORMANCE_DIR") == "" {
		t.Skip("no conformance suite here: set HOLDOFF_CONFORMANCE_DIR to a holdoff checkout's conformance/")
	}
	v, err := os.ReadFile(filepath.Join(conformanceDir, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(v))); n != suiteVersion {
		t.Fatalf("runner written for suite version %d, found %s", suiteVersion, v)
	}
	var files []string
	filepath.WalkDir(filepath.Join(conformanceDir, "cases"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	})
	sort.Strings(files)
	var cases []obj
	ids := map[string]bool{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var doc struct{ Cases []obj }
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, cs := range doc.Cases {
			id := str(cs, "id", "")
			if id == "" || ids[id] {
				t.Fatalf("%s: missing or duplicate case id %q", f, id)
			}
			ids[id] = true
			cases = append(cases, cs)
		}
	}
	return cases
}

// TestConformance prints `N passed, N failed, N skipped` at the end (run.sh conformance shows
// it as the last line).
func TestConformance(t *testing.T) {
	filter := os.Getenv("HOLDOFF_CASES")
	passed, failed := 0, 0
	for _, cs := range loadCases(t) {
		id := str(cs, "id", "")
		if !strings.Contains(id, filter) {
			continue
		}
		for _, flavour := range flavoursOf(cs) {
			name := id
			if flavour != "" {
				name += " [" + flavour + "]"
			}
			ok := t.Run(name, func(t *testing.T) {
				if err := runCase(cs, flavour); err != nil {
					t.Error(err)
				}
			})
			if ok {
				passed++
			} else {
				failed++
			}
		}
	}
	if passed+failed == 0 {
		t.Fatal("no case ran")
	}
	tally := fmt.Sprintf("%d passed, %d failed, 0 skipped", passed, failed)
	t.Log(tally)
	if path := os.Getenv("HOLDOFF_TALLY_FILE"); path != "" {
		os.WriteFile(path, []byte(tally+"\n"), 0o644)
	}
}
