package holdoff

// #include "holdoff.h"
import "C"

import (
	"io"
	"runtime"
	"time"
)

// BeforeAction is what a policy says before an attempt: Go, Wait or GiveUp.
type BeforeAction uint32

// Before actions. GiveUp, shared with DecisionKind, is defined with it.
const (
	Go   BeforeAction = C.HOLDOFF_BEFORE_ACTION_GO
	Wait BeforeAction = C.HOLDOFF_BEFORE_ACTION_WAIT
)

// String is the stable name: go, wait, give_up.
func (a BeforeAction) String() string {
	return cname(C.holdoff_before_action_name(C.uint32_t(a)), "action", uint32(a))
}

// Before is what to do before an attempt.
type Before struct {
	Action BeforeAction
	// Delay is the wait for the breaker (Wait).
	Delay time.Duration
	// Reason is why to give up (GiveUp: always BreakerOpenReason).
	Reason GiveUpReason
	// RetryAfter is the breaker's time until its next probe (GiveUp, HasRetryAfter).
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Policy composes one upstream's breaker, retry budget, optional quota and classifier. Do and
// DoHTTP run a logical call under it.
type Policy struct {
	h       handleRef[*C.holdoff_policy]
	parts   []io.Closer
	breaker *Breaker
	quota   *RetryQuota // nil without one
	// clock is the manual clock of its parts, on which attempts time out (nil: the system
	// clock).
	clock *ManualClock
	// call holds the defaults of Do and DoHTTP.
	call callOptions
}

// PolicyOption configures NewPolicy and ComposePolicy: the clock, and defaults for every Do
// and DoHTTP of the policy (WithSleeper, WithAttemptTimeout, WithTotalTimeout, WithOnRetry,
// WithOnAttempt, WithClassifier), which a call's own options override.
type PolicyOption = Option

func freePolicy(p *C.holdoff_policy)          { C.holdoff_policy_free(p) }
func freePolicyCall(p *C.holdoff_policy_call) { C.holdoff_policy_call_free(p) }

func newPolicy(b *Breaker, budget *RetryBudget, q *RetryQuota, cls *Classifier, opts []Option) (*Policy, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bh, err := b.h.acquire()
	if err != nil {
		return nil, err
	}
	defer b.h.release()
	gh, err := budget.h.acquire()
	if err != nil {
		return nil, err
	}
	defer budget.h.release()
	var qp *C.holdoff_retry_quota
	if q != nil {
		if qp, err = q.h.acquire(); err != nil {
			return nil, err
		}
		defer q.h.release()
	}
	var cp *C.holdoff_classifier
	if cls != nil {
		if cp, err = cls.h.acquire(); err != nil {
			return nil, err
		}
		defer cls.h.release()
	}
	var p *C.holdoff_policy
	err = detailed(func() C.holdoff_status {
		return C.holdoff_policy_new(bh, gh, qp, cp, &p)
	})
	if err != nil {
		return nil, err
	}
	// The call defaults are checked now, by the core, rather than at the first call.
	if err := o.call.check(p); err != nil {
		C.holdoff_policy_free(p)
		return nil, err
	}
	pol := &Policy{breaker: b, quota: q, call: o.call}
	pol.clock = budget.manual // the breaker's too: the core refuses parts with two clocks
	pol.h.init(p, &kindPolicy)
	pol.h.cleanup = runtime.AddCleanup(pol, freePolicy, p)
	return pol, nil
}

// ComposePolicy composes existing parts (q and cls may be nil: no quota, the default
// classifier). The breaker and the budget must read the same clock (ErrInvalidConfig, field
// policy.clock, otherwise); the time limits of Do and DoHTTP attempts run on it. The policy
// keeps the parts alive; their owner still closes them. Errors: also ErrInvalidConfig naming
// an invalid time limit among opts (execute.attempt_timeout, execute.total_timeout); an *Error
// matching ErrInvalidInput naming b or budget when it is nil.
func ComposePolicy(b *Breaker, budget *RetryBudget, q *RetryQuota, cls *Classifier, opts ...Option) (*Policy, error) {
	switch {
	case b == nil:
		return nil, nilErr("breaker")
	case budget == nil:
		return nil, nilErr("budget")
	}
	return newPolicy(b, budget, q, cls, opts)
}

// NewPolicy builds a policy and its parts with one clock. Errors: ErrInvalidConfig naming the
// first invalid field.
func NewPolicy(cfg PolicyConfig, opts ...Option) (*Policy, error) {
	spec := map[string]any{"breaker": cfg.Breaker.spec(), "budget": cfg.Budget.spec(),
		"classifier": cfg.Classifier.spec()}
	if cfg.Quota != nil {
		spec["quota"] = cfg.Quota.spec()
	}
	c, err := parseSpec(withFleet(spec, cfg.Breaker.Fleet))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	clock := o.clock
	if clock == nil {
		sc := NewSystemClock()
		defer sc.Close()
		clock = sc
	}
	var parts []io.Closer
	fail := func(err error) (*Policy, error) {
		for _, p := range parts {
			p.Close()
		}
		return nil, err
	}
	b, err := c.NewBreaker(WithClock(clock))
	if err != nil {
		return fail(err)
	}
	parts = append(parts, b)
	budget, err := c.NewRetryBudget(WithClock(clock))
	if err != nil {
		return fail(err)
	}
	parts = append(parts, budget)
	var q *RetryQuota
	if cfg.Quota != nil {
		if q, err = c.NewRetryQuota(); err != nil {
			return fail(err)
		}
		parts = append(parts, q)
	}
	cls, err := c.NewClassifier()
	if err != nil {
		return fail(err)
	}
	parts = append(parts, cls)
	p, err := newPolicy(b, budget, q, cls, opts)
	if err != nil {
		return fail(err)
	}
	p.parts = parts
	return p, nil
}

// Breaker is the policy's breaker (for snapshots and events), nil for a nil p. Closing the
// policy closes it if NewPolicy built it.
func (p *Policy) Breaker() *Breaker {
	if p == nil {
		return nil
	}
	return p.breaker
}

// Quota is the policy's retry quota (for its metrics), nil without one or for a nil p. Closing
// the policy closes it if NewPolicy built it.
func (p *Policy) Quota() *RetryQuota {
	if p == nil {
		return nil
	}
	return p.quota
}

// Close releases the policy and the parts NewPolicy built. Safe to call twice and
// concurrently with other methods: a Do in flight runs to its end on the core's policy, which
// its call keeps alive; later calls return ErrClosed.
func (p *Policy) Close() error {
	if p == nil {
		return nilErr("policy")
	}
	if p.h.close() {
		for _, c := range p.parts {
			c.Close()
		}
	}
	return nil
}

// PolicyCall is the state of one logical call (all its attempts) under a policy.
type PolicyCall struct {
	h handleRef[*C.holdoff_policy_call]
}

// NewCall starts a logical call.
func (p *Policy) NewCall() *PolicyCall {
	var c *C.holdoff_policy_call
	if st := C.holdoff_policy_call_new(&c); st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	call := &PolicyCall{}
	call.h.init(c, &kindPolicyCall)
	call.h.cleanup = runtime.AddCleanup(call, freePolicyCall, c)
	return call
}

// Attempts is the attempts admitted so far.
func (c *PolicyCall) Attempts() int {
	if c == nil {
		nilPanic("call")
	}
	var n C.uint32_t
	C.holdoff_policy_call_attempts(c.h.mustAcquire(), &n)
	c.h.release()
	return int(n)
}

// Close releases the call's handle.
func (c *PolicyCall) Close() error {
	if c == nil {
		return nilErr("call")
	}
	c.h.close()
	return nil
}

// BeforeAttempt says, before an attempt, whether to go (Go, with the permit to record), wait
// for the breaker (Wait), or give up because it stays open beyond what is left of the budget
// (GiveUp). A first attempt does not wait for an open breaker. Errors: an *Error matching
// ErrInvalidInput naming policy or call when it is nil; ErrClosed after Close of either.
func (p *Policy) BeforeAttempt(call *PolicyCall) (Before, *Permit, error) {
	if p == nil {
		return Before{}, nil, nilErr("policy")
	}
	h, err := p.h.acquire()
	if err != nil {
		return Before{}, nil, err
	}
	defer p.h.release()
	return p.beforeAttempt(h, call)
}

// beforeAttempt is BeforeAttempt on a policy handle the caller holds a use of.
func (p *Policy) beforeAttempt(h *C.holdoff_policy, call *PolicyCall) (Before, *Permit, error) {
	if call == nil {
		return Before{}, nil, nilErr("call")
	}
	ch, err := call.h.acquire()
	if err != nil {
		return Before{}, nil, err
	}
	defer call.h.release()
	var b C.holdoff_before
	permit := new(Permit)
	if st := C.holdoff_policy_before_attempt(h, ch, &b, &permit.c); st != C.HOLDOFF_STATUS_OK {
		return Before{}, nil, errOf(st)
	}
	ra, has := optDur(b.has_retry_after, b.retry_after_ns)
	out := Before{Action: BeforeAction(b.action), Delay: dur(b.delay_ns), Reason: GiveUpReason(b.reason),
		RetryAfter: ra, HasRetryAfter: has}
	if out.Action != Go {
		return out, nil, nil
	}
	return out, permit, nil
}

// AfterAttempt records an attempt's outcome and decides: done, retry after a delay (never
// shorter than the breaker needs), or give up. Errors: ErrForeignPermit,
// ErrPermitAlreadyRecorded; an *Error matching ErrInvalidInput naming policy, call or permit
// when it is nil.
func (p *Policy) AfterAttempt(call *PolicyCall, permit *Permit, o Outcome) (Decision, error) {
	if p == nil {
		return Decision{}, nilErr("policy")
	}
	h, err := p.h.acquire()
	if err != nil {
		return Decision{}, err
	}
	defer p.h.release()
	return p.afterAttempt(h, call, permit, o)
}

func (p *Policy) afterAttempt(h *C.holdoff_policy, call *PolicyCall, permit *Permit, o Outcome) (Decision, error) {
	if err := callAndPermit(call, permit); err != nil {
		return Decision{}, err
	}
	kind, ns, err := o.c()
	if err != nil {
		return Decision{}, err
	}
	ch, err := call.h.acquire()
	if err != nil {
		return Decision{}, err
	}
	defer call.h.release()
	var d C.holdoff_decision
	st := C.holdoff_policy_after_attempt(h, ch, &permit.c, kind, ns, &d)
	if st != C.HOLDOFF_STATUS_OK {
		return Decision{}, errOf(st)
	}
	return decisionOf(&d), nil
}

// callAndPermit refuses a nil call or permit, naming it.
func callAndPermit(call *PolicyCall, permit *Permit) error {
	switch {
	case call == nil:
		return nilErr("call")
	case permit == nil:
		return nilErr("permit")
	}
	return nil
}

// AfterResponse is AfterAttempt for an HTTP response: it classifies (status, headers) at the
// decision's one clock reading, then decides. status is whatever integer the HTTP client
// gave, passed to the core as is: 0..999 is a status (one outside 100..599 is a broken
// upstream, recorded as a failure). Errors: an *Error matching ErrInvalidInput with Field
// "status" for a value outside 0..999 (-1, 1000, 70000), after which the permit is recorded
// as cancelled (a probe frees its slot, its window stays spent) and cannot be recorded again;
// ErrForeignPermit; ErrPermitAlreadyRecorded; ErrInvalidInput naming policy, call or permit
// when it is nil.
func (p *Policy) AfterResponse(call *PolicyCall, permit *Permit, status int, headers []Header) (Decision, Classification, error) {
	if p == nil {
		return Decision{}, Classification{}, nilErr("policy")
	}
	h, err := p.h.acquire()
	if err != nil {
		return Decision{}, Classification{}, err
	}
	defer p.h.release()
	return p.afterResponse(h, call, permit, status, headers)
}

func (p *Policy) afterResponse(h *C.holdoff_policy, call *PolicyCall, permit *Permit, status int, headers []Header) (Decision, Classification, error) {
	if err := callAndPermit(call, permit); err != nil {
		return Decision{}, Classification{}, err
	}
	ch, err := call.h.acquire()
	if err != nil {
		return Decision{}, Classification{}, err
	}
	defer call.h.release()
	arr, n, free := cHeaders(headers)
	defer free()
	var d C.holdoff_decision
	var cl C.holdoff_classification
	if err := detailed(func() C.holdoff_status {
		return C.holdoff_policy_after_response(h, ch, &permit.c, C.int64_t(status), arr, n, &d, &cl)
	}); err != nil {
		return Decision{}, Classification{}, err
	}
	return decisionOf(&d), classificationOf(&cl), nil
}

var kindPolicy = handleKind[*C.holdoff_policy]{"Policy", freePolicy}

var kindPolicyCall = handleKind[*C.holdoff_policy_call]{"PolicyCall", freePolicyCall}
