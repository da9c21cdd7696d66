package holdoff

// #include "holdoff.h"
import "C"

import (
	"fmt"
	"runtime"
	"time"
)

// DecisionKind is the kind of a retry decision.
type DecisionKind uint32

// Decision kinds.
const (
	Done  DecisionKind = C.HOLDOFF_DECISION_KIND_DONE
	Retry DecisionKind = C.HOLDOFF_DECISION_KIND_RETRY
)

// GiveUp is the core's one name for giving up, as a DecisionKind (Decision.Kind) and as a
// BeforeAction (Before.Action): an untyped constant, so that it compares with both, as the
// core's Decision::GiveUp and Before::GiveUp are one word. Its value is both C codes.
const GiveUp = 2

// Compile-time checks that GiveUp is both C codes: an index out of range otherwise.
var (
	_ = [1]struct{}{}[C.HOLDOFF_DECISION_KIND_GIVE_UP-GiveUp]
	_ = [1]struct{}{}[C.HOLDOFF_BEFORE_ACTION_GIVE_UP-GiveUp]
)

// String is the stable name: done, retry, give_up.
func (k DecisionKind) String() string {
	return cname(C.holdoff_decision_kind_name(C.uint32_t(k)), "decision", uint32(k))
}

// WaitSource is where a retry's delay came from.
type WaitSource uint32

// Wait sources.
const (
	FromRetryAfter WaitSource = C.HOLDOFF_WAIT_SOURCE_RETRY_AFTER
	FromBackoff    WaitSource = C.HOLDOFF_WAIT_SOURCE_BACKOFF
	FromBreaker    WaitSource = C.HOLDOFF_WAIT_SOURCE_BREAKER
)

// String is the stable name: retry_after, backoff, breaker.
func (s WaitSource) String() string {
	return cname(C.holdoff_wait_source_name(C.uint32_t(s)), "source", uint32(s))
}

// GiveUpReason is why a caller should stop retrying.
type GiveUpReason uint32

// Give-up reasons.
const (
	BudgetSpent                GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_BUDGET_SPENT
	RetryAfterExceedsRemaining GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_EXCEEDS_REMAINING
	BackoffExceedsRemaining    GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_BACKOFF_EXCEEDS_REMAINING
	AttemptsExhausted          GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_ATTEMPTS_EXHAUSTED
	NotRetryable               GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_NOT_RETRYABLE
	QuotaEmpty                 GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_QUOTA_EMPTY
	BreakerOpenReason          GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_BREAKER_OPEN
	CancelledReason            GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_CANCELLED
	// RetryAfterAboveCap: the server asked for longer than the budget's RetryAfterCap and
	// BudgetConfig.GiveUpAboveCap is set; the decision carries the server's delay.
	RetryAfterAboveCap GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_RETRY_AFTER_ABOVE_CAP
	// TotalTimeout: the call's total time ran out, or the next wait would leave no time for
	// another attempt within it.
	TotalTimeout GiveUpReason = C.HOLDOFF_GIVE_UP_REASON_TOTAL_TIMEOUT
)

// String is the core's stable name: budget_spent, retry_after_exceeds_remaining,
// backoff_exceeds_remaining, attempts_exhausted, not_retryable, quota_empty, breaker_open,
// cancelled, retry_after_above_cap, total_timeout.
func (r GiveUpReason) String() string {
	return cname(C.holdoff_give_up_reason_name(C.uint32_t(r)), "reason", uint32(r))
}

// Decision is what to do after an attempt.
type Decision struct {
	Kind DecisionKind
	// Delay is the wait before the next attempt (Retry): never shorter than the server asked,
	// up to the cap.
	Delay time.Duration
	// Source is where Delay came from (Retry).
	Source WaitSource
	// ServerDelay is the server's own delay before the cap (HasServerDelay): on a Retry on the
	// Retry-After path, and on a GiveUp the server's delay caused (RetryAfterAboveCap,
	// RetryAfterExceedsRemaining).
	ServerDelay    time.Duration
	HasServerDelay bool
	// Capped reports that the cap shortened the server's value (never silent).
	Capped bool
	// Reason is why to stop (GiveUp).
	Reason GiveUpReason
}

func decisionOf(d *C.holdoff_decision) Decision {
	sd, has := optDur(d.has_server_delay, d.server_delay_ns)
	return Decision{Kind: DecisionKind(d.kind), Delay: dur(d.delay_ns), Source: WaitSource(d.source),
		ServerDelay: sd, HasServerDelay: has, Capped: d.capped != 0, Reason: GiveUpReason(d.reason)}
}

// RetryBudget decides when to retry, how long to wait and when to give up, for every caller
// of one upstream: a rate-limit episode budget with a Retry-After cap (never shortening the
// server's wait), and a counted backoff path.
type RetryBudget struct {
	h handleRef[*C.holdoff_retry_budget]
	// manual is the manual clock it reads, nil for a system clock: the attempts of a policy
	// composed with it time out on it (the core holds a policy's breaker to the same clock).
	manual *ManualClock
}

func freeBudget(p *C.holdoff_retry_budget)    { C.holdoff_retry_budget_free(p) }
func freeRetryState(p *C.holdoff_retry_state) { C.holdoff_retry_state_free(p) }
func freeQuota(p *C.holdoff_retry_quota)      { C.holdoff_retry_quota_free(p) }

func wrapBudget(p *C.holdoff_retry_budget, clock Clock) *RetryBudget {
	b := &RetryBudget{}
	b.manual, _ = clock.(*ManualClock)
	b.h.init(p, &kindRetryBudget)
	b.h.cleanup = runtime.AddCleanup(b, freeBudget, p)
	return b
}

// NewRetryBudget creates a retry budget. Errors: ErrInvalidConfig naming the field (e.g.
// budget.max_rate_limit_duration when it leaves no room for two capped waits).
func NewRetryBudget(cfg BudgetConfig, opts ...Option) (*RetryBudget, error) {
	c, err := parseSpec(map[string]any{"budget": cfg.spec()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.NewRetryBudget(opts...)
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (b *RetryBudget) alive() error { return b.h.alive() }

// Close releases the budget's handle (a policy using it keeps it alive).
func (b *RetryBudget) Close() error {
	if b == nil {
		return nilErr("budget")
	}
	b.h.close()
	return nil
}

// Decide says what to do after an attempt of the logical call s ended with o. Errors: an
// *Error matching ErrInvalidInput naming budget or state when it is nil, or outcome.delay
// for a negative delay.
func (b *RetryBudget) Decide(s *RetryState, o Outcome) (Decision, error) {
	switch {
	case b == nil:
		return Decision{}, nilErr("budget")
	case s == nil:
		return Decision{}, nilErr("state")
	}
	kind, ns, err := o.c()
	if err != nil {
		return Decision{}, err
	}
	bh, err := b.h.acquire()
	if err != nil {
		return Decision{}, err
	}
	defer b.h.release()
	sh, err := s.h.acquire()
	if err != nil {
		return Decision{}, err
	}
	defer s.h.release()
	var d C.holdoff_decision
	st := C.holdoff_retry_budget_decide(bh, sh, kind, ns, &d)
	if st != C.HOLDOFF_STATUS_OK {
		return Decision{}, errOf(st)
	}
	return decisionOf(&d), nil
}

// Episode reports whether a rate-limit episode is under way and when it started (on the
// budget's clock).
func (b *RetryBudget) Episode() (start time.Duration, active bool) {
	if b == nil {
		nilPanic("budget")
	}
	var e C.holdoff_episode
	C.holdoff_retry_budget_episode(b.h.mustAcquire(), &e)
	b.h.release()
	return dur(e.start_ns), e.active != 0
}

// RetryState is the per-call part of retrying (retries taken, first failure): one per logical
// call, across its attempts.
type RetryState struct {
	h handleRef[*C.holdoff_retry_state]
}

// NewRetryState starts a logical call.
func NewRetryState() *RetryState {
	var p *C.holdoff_retry_state
	if st := C.holdoff_retry_state_new(&p); st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	s := &RetryState{}
	s.h.init(p, &kindRetryState)
	s.h.cleanup = runtime.AddCleanup(s, freeRetryState, p)
	return s
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (s *RetryState) alive() error { return s.h.alive() }

// Retries is the retries the call took on the counted path.
func (s *RetryState) Retries() int {
	if s == nil {
		nilPanic("state")
	}
	var n C.uint32_t
	C.holdoff_retry_state_retries(s.h.mustAcquire(), &n)
	s.h.release()
	return int(n)
}

// Close releases the state's handle.
func (s *RetryState) Close() error {
	if s == nil {
		return nilErr("state")
	}
	s.h.close()
	return nil
}

// RetryQuota is a token bucket shared by every caller of one upstream: retries cost tokens,
// retries after a timeout cost more, successes refund. An empty bucket gives up
// (QuotaEmpty) instead of joining a retry storm.
type RetryQuota struct {
	h handleRef[*C.holdoff_retry_quota]
}

func wrapQuota(p *C.holdoff_retry_quota) *RetryQuota {
	q := &RetryQuota{}
	q.h.init(p, &kindRetryQuota)
	q.h.cleanup = runtime.AddCleanup(q, freeQuota, p)
	return q
}

// NewRetryQuota creates a full quota. Errors: ErrInvalidConfig naming the field.
func NewRetryQuota(cfg QuotaConfig) (*RetryQuota, error) {
	c, err := parseSpec(map[string]any{"quota": cfg.spec()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.NewRetryQuota()
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (q *RetryQuota) alive() error { return q.h.alive() }

// Close releases the quota's handle (a policy using it keeps it alive).
func (q *RetryQuota) Close() error {
	if q == nil {
		return nilErr("quota")
	}
	q.h.close()
	return nil
}

// QuotaLease is the result of RetryQuota.Acquire: the C library's lease, which carries the
// identity of the quota that issued it and whether it was given back. Give an acquired lease
// back with OnSuccess on that quota, at most once; share the *QuotaLease (a copy of the value
// would have its own given-back flag).
type QuotaLease struct {
	c C.holdoff_quota_lease
}

// Acquired reports whether the tokens were taken.
func (l *QuotaLease) Acquired() bool { return l.raw().acquired != 0 }

// Cost is what the retry cost (or would have cost).
func (l *QuotaLease) Cost() uint64 { return uint64(l.raw().cost) }

// Available is the tokens left right after the acquisition.
func (l *QuotaLease) Available() uint64 { return uint64(l.raw().available) }

// raw is the C library's lease; a nil l panics with an *Error naming lease.
func (l *QuotaLease) raw() *C.holdoff_quota_lease {
	if l == nil {
		nilPanic("lease")
	}
	return &l.c
}

func (l *QuotaLease) String() string {
	return fmt.Sprintf("QuotaLease{acquired: %v, cost: %d}", l.Acquired(), l.Cost())
}

// Acquire takes the cost of one retry (the timeout cost if afterTimeout). The lease says
// whether the bucket could pay.
func (q *RetryQuota) Acquire(afterTimeout bool) *QuotaLease {
	if q == nil {
		nilPanic("quota")
	}
	l := new(QuotaLease)
	var t C.uint8_t
	if afterTimeout {
		t = 1
	}
	C.holdoff_retry_quota_acquire(q.h.mustAcquire(), t, &l.c)
	q.h.release()
	return l
}

// OnSuccess refunds the lease of a call that finally succeeded, or adds the configured refill
// if lease is nil (a success without retry); never past capacity. The core checks the lease.
// Errors, each an *Error with Field "lease" that leaves the bucket unchanged: ErrForeignPermit
// for a lease another quota issued (it stays usable on its own quota),
// ErrPermitAlreadyRecorded for a lease given back before (by any goroutine), ErrInvalidInput
// for a lease that was not acquired.
func (q *RetryQuota) OnSuccess(lease *QuotaLease) error {
	if q == nil {
		return nilErr("quota")
	}
	h, err := q.h.acquire()
	if err != nil {
		return err
	}
	defer q.h.release()
	var p *C.holdoff_quota_lease
	if lease != nil {
		p = &lease.c
	}
	return detailed(func() C.holdoff_status { return C.holdoff_retry_quota_on_success(h, p) })
}

// Available is the tokens left.
func (q *RetryQuota) Available() uint64 {
	if q == nil {
		nilPanic("quota")
	}
	var n C.uint64_t
	C.holdoff_retry_quota_available(q.h.mustAcquire(), &n)
	q.h.release()
	return uint64(n)
}

var kindRetryBudget = handleKind[*C.holdoff_retry_budget]{"RetryBudget", freeBudget}

var kindRetryState = handleKind[*C.holdoff_retry_state]{"RetryState", freeRetryState}

var kindRetryQuota = handleKind[*C.holdoff_retry_quota]{"RetryQuota", freeQuota}
