package holdoff

// #include <stdlib.h>
// #include "holdoff.h"
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// State is a breaker's state.
type State uint32

// Breaker states.
const (
	Closed     State = C.HOLDOFF_STATE_CLOSED
	Open       State = C.HOLDOFF_STATE_OPEN
	HalfOpen   State = C.HOLDOFF_STATE_HALF_OPEN
	ForcedOpen State = C.HOLDOFF_STATE_FORCED_OPEN
	Disabled   State = C.HOLDOFF_STATE_DISABLED
)

// String is the stable name: closed, open, half_open, forced_open, disabled.
func (s State) String() string { return cname(C.holdoff_state_name(C.uint32_t(s)), "state", uint32(s)) }

func cname(p *C.char, kind string, v uint32) string {
	if p == nil {
		return fmt.Sprintf("%s(%d)", kind, v)
	}
	return C.GoString(p)
}

// OutcomeKind is what happened to a call.
type OutcomeKind uint32

// Outcome kinds.
const (
	KindSuccess    OutcomeKind = C.HOLDOFF_OUTCOME_SUCCESS
	KindAnswer     OutcomeKind = C.HOLDOFF_OUTCOME_ANSWER
	KindFailure    OutcomeKind = C.HOLDOFF_OUTCOME_FAILURE
	KindTimeout    OutcomeKind = C.HOLDOFF_OUTCOME_TIMEOUT
	KindRetryLater OutcomeKind = C.HOLDOFF_OUTCOME_RETRY_LATER
	KindCancelled  OutcomeKind = C.HOLDOFF_OUTCOME_CANCELLED
)

// String is the stable name: success, answer, failure, timeout, retry_later, cancelled.
func (k OutcomeKind) String() string {
	return cname(C.holdoff_outcome_name(C.uint32_t(k)), "outcome", uint32(k))
}

// Outcome is what happened to a call, as the breaker and budget need to know it.
type Outcome struct {
	Kind OutcomeKind
	// Delay is the provider's delay of a RetryLaterOutcome.
	Delay time.Duration
}

// The outcomes without a delay.
var (
	// Success: the call succeeded.
	Success = Outcome{Kind: KindSuccess}
	// Answer: the upstream answered, but retrying would not help (a 404); it proves the
	// upstream reachable.
	Answer = Outcome{Kind: KindAnswer}
	// Failure: a transient failure (a 5xx, a refused connection).
	Failure = Outcome{Kind: KindFailure}
	// Timeout: the call timed out (a failure that costs more retry quota).
	Timeout = Outcome{Kind: KindTimeout}
	// Cancelled: the caller gave up; counts for nothing and frees a probe slot.
	Cancelled = Outcome{Kind: KindCancelled}
)

// RetryLaterOutcome: the upstream asked to be left alone for d (a 429 or 503 with
// Retry-After). It opens the breaker at once for d; a zero d is a plain failure.
func RetryLaterOutcome(d time.Duration) Outcome { return Outcome{Kind: KindRetryLater, Delay: d} }

func (o Outcome) c() (C.uint32_t, C.uint64_t, error) {
	ns, ok := nanos(o.Delay)
	if !ok {
		return 0, 0, inputErr("outcome.delay", "must not be negative")
	}
	return C.uint32_t(o.Kind), ns, nil
}

// Effect is what recording an outcome did.
type Effect uint32

// Effects.
const (
	Counted Effect = C.HOLDOFF_EFFECT_COUNTED
	Stale   Effect = C.HOLDOFF_EFFECT_STALE
	Ignored Effect = C.HOLDOFF_EFFECT_IGNORED
)

// String is the stable name: counted, stale, ignored.
func (e Effect) String() string {
	return cname(C.holdoff_effect_name(C.uint32_t(e)), "effect", uint32(e))
}

// Reason is why a breaker's state changed.
type Reason uint32

// String is the stable name: tripped, retry_later, probe_admitted, probe_failed, recovered,
// forced_open, disabled, reset.
func (r Reason) String() string {
	return cname(C.holdoff_reason_name(C.uint32_t(r)), "reason", uint32(r))
}

// Permit is leave to make one call. Record it exactly once; a second record fails with
// ErrPermitAlreadyRecorded. An unrecorded probe permit holds its slot until the probe timeout.
type Permit struct {
	c C.holdoff_permit
}

// Episode is the open episode this call is a probe of, or 0 if it was admitted while closed.
func (p *Permit) Episode() uint32 { return uint32(p.raw().episode) }

// IsProbe reports whether the call is a probe of an open breaker.
func (p *Permit) IsProbe() bool {
	// An atomic load: the word holding probe also holds the recorded flag, which a record on
	// another goroutine may be setting.
	return atomic.LoadUint32(flagWord(p.raw()))&permitLayout.probe != 0
}

// flagWord is the aligned 32-bit word of the permit that holds its recorded byte.
func flagWord(c *C.holdoff_permit) *uint32 {
	return (*uint32)(unsafe.Add(unsafe.Pointer(c), permitLayout.offset))
}

// markRecorded sets the permit's recorded flag as the library does (atomically, so one of two
// concurrent records wins), and reports whether this call set it. The library swaps the byte
// alone; a compare-and-swap of the aligned word around it is the same atomic update of that
// byte, as sync/atomic has no 8-bit operations.
func (p *Permit) markRecorded() bool {
	w := flagWord(&p.c)
	for {
		old := atomic.LoadUint32(w)
		if old&permitLayout.recorded != 0 {
			return false
		}
		if atomic.CompareAndSwapUint32(w, old, old|permitLayout.recorded) {
			return true
		}
	}
}

// permitLayout locates the recorded flag (and the probe byte beside it) in holdoff_permit, as
// masks of the 32-bit word at offset: computed, so neither the byte order nor the field order
// is assumed.
var permitLayout = func() (l struct {
	offset          uintptr
	recorded, probe uint32
}) {
	var p C.holdoff_permit
	l.offset = unsafe.Offsetof(p.recorded) &^ 3
	w := (*uint32)(unsafe.Add(unsafe.Pointer(&p), l.offset))
	p.recorded = 0xFF
	l.recorded = *w
	p.recorded, p.probe = 0, 0xFF
	l.probe = *w
	return l
}()

// raw is the C library's permit; a nil p panics with an *Error naming permit.
func (p *Permit) raw() *C.holdoff_permit {
	if p == nil {
		nilPanic("permit")
	}
	return &p.c
}

// Breaker is a circuit breaker for one upstream. Share one between every goroutine that calls
// the upstream. While closed, Allow and recording a success take no lock and read no clock;
// while closed with no failure pending and its metrics not read, they do not call into the C
// library either: they read the breaker's fast-path word (docs/ffi.md "The fast-path word").
type Breaker struct {
	// Kept to 24 bytes, a size class: a program may keep one per upstream key. Hence a
	// finalizer rather than a runtime cleanup (no Cleanup field, no boxed argument, one
	// record), a handle whose kind is fixed and whose state carries the breaker's id (the id
	// its permits carry, read with the state by the fast path), and no clock (a policy takes
	// its budget's, which the core makes sure is the breaker's).
	h breakerHandle
	// word is the core's fast-path word (C memory, read with sync/atomic only), nil when every
	// call goes through the library (a fleet's breaker, or a library with another layout).
	word *uint64
}

// breakerHandle is a Breaker's handle, of kind kindBreaker.
type breakerHandle struct{ handle[*C.holdoff_breaker] }

func (h *breakerHandle) acquire() (*C.holdoff_breaker, error) { return h.acquireAs(&kindBreaker) }
func (h *breakerHandle) mustAcquire() *C.holdoff_breaker      { return h.mustAcquireAs(&kindBreaker) }
func (h *breakerHandle) release()                             { h.releaseAs(&kindBreaker) }
func (h *breakerHandle) alive() error                         { return h.aliveAs(&kindBreaker) }

func freeBreaker(p *C.holdoff_breaker) { C.holdoff_breaker_free(p) }

// finalizeBreaker frees the handle of an unreachable breaker, unless Close already did: no
// call can be in flight on it any more.
func finalizeBreaker(b *Breaker) {
	if !b.h.freed() {
		freeBreaker(b.h.ptr)
	}
}

// The fast-path protocol this package implements (docs/ffi.md "The fast-path word"), and the
// admission mask the library gives for it (0: the word is never read).
const fastPathVersion = 1

var fastAdmitMask uint64

// readFastAdmitMask is the library's admission mask for this protocol, read from a breaker made
// for the purpose, or 0 (never admit on the word) for a library speaking another version. It
// runs once, after the ABI check (holdoff.go's init).
func readFastAdmitMask() uint64 {
	if C.HOLDOFF_FAST_PATH_VERSION != fastPathVersion {
		return 0
	}
	var clock *C.holdoff_clock
	if C.holdoff_clock_new_system(&clock) != C.HOLDOFF_STATUS_OK {
		return 0
	}
	defer C.holdoff_clock_free(clock)
	var b *C.holdoff_breaker
	if C.holdoff_breaker_new(nil, clock, &b) != C.HOLDOFF_STATUS_OK {
		return 0
	}
	defer C.holdoff_breaker_free(b)
	var fp C.holdoff_fast_path
	if C.holdoff_breaker_fast_path(b, &fp) != C.HOLDOFF_STATUS_OK || fp.version != fastPathVersion {
		return 0
	}
	refusalCounting = readRefusalPath(b, fp.word)
	return uint64(fp.admit_mask)
}

// The refusal protocol this package implements (docs/ffi.md "The refusal block"), and the
// block's cells as byte offsets from the fast-path word.
const (
	refusalPathVersion = 1
	refuseUntilOffset  = 8
	refusalsOffset     = 16
	refusalSeqOffset   = 24
)

// refusalCounting is the library's counting mask for the refusal protocol, 0 when breakers
// never refuse in place (a library speaking another version or another layout, or a platform
// whose monotonic clock may not be the library's).
var refusalCounting uint64

// readRefusalPath is the counting mask of b's refusal block, or 0 unless the library speaks
// this version with the block at the offsets above, on Linux (where Go's monotonic readings
// and the library's system clock both read CLOCK_MONOTONIC).
func readRefusalPath(b *C.holdoff_breaker, word *C.uint64_t) uint64 {
	var rp C.holdoff_refusal_path
	if runtime.GOOS != "linux" || C.holdoff_breaker_refusal_path(b, &rp) != C.HOLDOFF_STATUS_OK ||
		rp.version != refusalPathVersion || rp.word != word || rp.counting_mask == 0 {
		return 0
	}
	base := uintptr(unsafe.Pointer(word))
	if uintptr(unsafe.Pointer(rp.refuse_until)) != base+refuseUntilOffset ||
		uintptr(unsafe.Pointer(rp.refusals)) != base+refusalsOffset ||
		uintptr(unsafe.Pointer(rp.seq)) != base+refusalSeqOffset {
		return 0
	}
	return uint64(rp.counting_mask)
}

// wrapBreaker owns p; fast says whether its calls may use the fast-path word (not a fleet's
// breaker: its Close must free it at once, which joins the fleet's thread), and sharedClock
// whether p reads breakerClock, so that it may refuse in place (see refuse).
func wrapBreaker(p *C.holdoff_breaker, fast, sharedClock bool) *Breaker {
	b := &Breaker{}
	var fp C.holdoff_fast_path
	if fast && fastAdmitMask != 0 && C.holdoff_breaker_fast_path(p, &fp) == C.HOLDOFF_STATUS_OK &&
		fp.version == fastPathVersion && uint64(fp.admit_mask) == fastAdmitMask && fp.word != nil {
		b.word = (*uint64)(unsafe.Pointer(fp.word))
		b.h.initMarked(p, uint32(fp.breaker), sharedClock && refusalCounting != 0)
	} else {
		b.h.init(p, 0)
	}
	runtime.SetFinalizer(b, finalizeBreaker)
	return b
}

// use gives the handle for one call. A breaker with a fast path is pinned on its first call
// (see handle): from then on the *Breaker itself keeps the handle alive, so held is false
// and only runtime.KeepAlive(b) after the call is needed; otherwise the call holds a use, which
// done releases. Errors: ErrClosed after Close.
func (b *Breaker) use() (h *C.holdoff_breaker, held bool, err error) {
	s := b.h.state.Load()
	if s&handleClosed != 0 {
		return nil, false, closedErr(kindBreaker.what)
	}
	if s&handlePinned != 0 || (b.word != nil && b.h.pin()) {
		return b.h.ptr, false, nil
	}
	h, err = b.h.acquire()
	return h, err == nil, err
}

// done ends the call use began.
func (b *Breaker) done(held bool) {
	if held {
		b.h.release()
	}
	runtime.KeepAlive(b)
}

// fastID is the breaker's id, and whether the fast-path word may be read now: the breaker is
// pinned (so its native memory lives as long as b; only a breaker with a word is pinned) and
// not closed.
func (b *Breaker) fastID() (id uint32, open bool) {
	s := b.h.state.Load()
	return uint32(uint64(s) >> handleTagShift), s&(handleClosed|handlePinned) == handlePinned
}

// fastAdmit admits a call on the word alone, writing the permit the library would have
// issued; false: ask the library. s is the handle's state, loaded by the caller.
func (b *Breaker) fastAdmit(s int64, p *C.holdoff_permit) bool {
	if s&(handleClosed|handlePinned) != handlePinned {
		return false
	}
	w := atomic.LoadUint64(b.word)
	runtime.KeepAlive(b)
	if w&fastAdmitMask != 0 {
		return false
	}
	*p = C.holdoff_permit{raw_breaker: C.uint32_t(uint64(s) >> handleTagShift), raw_episode: C.uint32_t(w >> 32)}
	return true
}

// fastSuccess records a success on the word alone when that would change nothing (closed in
// the permit's episode, no failure pending, no flag), marking the permit recorded; false:
// record it through the library, which also gives the errors (foreign, already recorded).
func (b *Breaker) fastSuccess(p *Permit) bool {
	if id, open := b.fastID(); !open || p.c.raw_probe != 0 || uint32(p.c.raw_breaker) != id {
		return false
	}
	w := atomic.LoadUint64(b.word)
	runtime.KeepAlive(b)
	return w == uint64(p.c.raw_episode)<<32 && p.markRecorded()
}

// refusesInPlace is the handle mark of a breaker that refuses in place: it has a fast-path
// word and reads breakerClock, whose readings nowOnBreakerClock maps Go's onto.
const refusesInPlace = handleMark

// refuse refuses a call on the breaker's refusal block alone, as the library would have
// (docs/ffi.md "The refusal block"; the core's refuse_on_block is the reference): forced open,
// or open or half-open before the published deadline, with its metrics not counting. It
// writes the refusal to r and counts it in the block, so the snapshot's Refusals include it.
// False: ask the library. s is the handle's state, loaded by the caller.
func (b *Breaker) refuse(s int64, r *refusal) bool {
	if s&(handleClosed|handlePinned|refusesInPlace) != handlePinned|refusesInPlace {
		return false
	}
	// The early returns need no KeepAlive: on false the caller goes on with b.
	base := unsafe.Pointer(b.word)
	seq := (*uint32)(unsafe.Add(base, refusalSeqOffset))
	q := atomic.LoadUint32(seq)
	w := atomic.LoadUint64(b.word)
	r.state, r.episode = State(w&7), uint32(w>>32)
	switch {
	case w&refusalCounting != 0:
		return false
	case r.state == ForcedOpen:
		r.wait, r.hasWait = 0, false
	case r.state == Open || r.state == HalfOpen:
		until := atomic.LoadUint64((*uint64)(unsafe.Add(base, refuseUntilOffset)))
		if q&1 != 0 || until == 0 || atomic.LoadUint32(seq) != q {
			return false
		}
		now := nowOnBreakerClock()
		if now >= until {
			return false
		}
		// Saturated as the library's refusals are: a wait past what a Duration holds (an open
		// interval of centuries) must not wrap to a negative one.
		r.wait, r.hasWait = time.Duration(min(until-now, math.MaxInt64)), true
	default:
		return false
	}
	atomic.AddUint64((*uint64)(unsafe.Add(base, refusalsOffset)), 1)
	runtime.KeepAlive(b)
	return true
}

// refusal is a refusal, decided in place or by the library: wait is the time to the next
// probe (hasWait; none while forced open).
type refusal struct {
	wait    time.Duration
	state   State
	episode uint32
	hasWait bool
}

// fromC is the library's refusal.
func (r *refusal) fromC(c *C.holdoff_refusal) {
	r.wait, r.hasWait = optDur(c.has_retry_after, c.retry_after_ns)
	r.state, r.episode = State(c.state), uint32(c.episode)
}

// err is the *BreakerOpenError of the refusal.
func (r *refusal) err() *BreakerOpenError {
	return &BreakerOpenError{Unavailable: Unavailable{Reason: BreakerOpenReason, RetryAfter: r.wait,
		HasRetryAfter: r.hasWait}, State: r.state, Episode: r.episode}
}

// fastRecordable is what Record and Do may record on the word: a success (with a delay the
// library would accept; it ignores it).
func fastRecordable(o Outcome) bool { return o.Kind == KindSuccess && o.Delay >= 0 }

// libraryCalls, when set by a test, counts the admissions and records that went through the C
// library (not the fast path). Nil outside tests.
var libraryCalls atomic.Pointer[atomic.Int64]

func countLibraryCall() {
	if n := libraryCalls.Load(); n != nil {
		n.Add(1)
	}
}

// NewBreaker creates a closed breaker. Errors: an *Error matching ErrInvalidConfig whose
// Field names the invalid field (breaker.open_interval.multiplier, ...).
func NewBreaker(cfg BreakerConfig, opts ...Option) (*Breaker, error) {
	// On the configuration's handle alone, without a *Config, and from the last JSON when cfg
	// is the last configuration: a program may make breakers by the thousand, and the JSON is
	// almost all the garbage one leaves (about 40 objects).
	if last := lastBreakerSpec.Load(); last != nil && cfg.Fleet == nil && last.cfg == cfg {
		if h, err := parseConfigHandle(last.text); err == nil {
			defer C.holdoff_config_free(h)
			return newBreaker(h, opts)
		}
	}
	spec := withFleet(map[string]any{"breaker": cfg.spec()}, cfg.Fleet)
	text, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	h, err := parseConfigHandle(text)
	if err != nil {
		return nil, inGoTerms(err, spec)
	}
	defer C.holdoff_config_free(h)
	if cfg.Fleet == nil { // a FleetConfig may change behind its pointer
		lastBreakerSpec.Store(&breakerSpec{cfg, text})
	}
	return newBreaker(h, opts)
}

// lastBreakerSpec is the last configuration without a Fleet that NewBreaker parsed without
// error, with its JSON.
var lastBreakerSpec atomic.Pointer[breakerSpec]

type breakerSpec struct {
	cfg  BreakerConfig
	text []byte
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (b *Breaker) alive() error { return b.h.alive() }

// Close releases the breaker's handle (a policy or group using the breaker keeps it alive).
// Safe to call twice and concurrently with other methods: calls in flight finish on the
// live handle, later calls return (or panic with) ErrClosed. A breaker that has made a call
// (and has no fleet) is freed by its finalizer instead, once the *Breaker is unreachable: its
// calls read the core's fast-path word without holding a use of the handle, so only then can
// no reader remain. LiveHandles counts it until then.
func (b *Breaker) Close() error {
	if b == nil {
		return nilErr("breaker")
	}
	if first, pinned := b.h.shut(); first {
		if !pinned {
			// release frees the handle (now, or after the calls in flight).
			runtime.SetFinalizer(b, nil)
		}
		b.h.release()
	}
	return nil
}

func refusalErr(r *C.holdoff_refusal) *BreakerOpenError {
	d, has := optDur(r.has_retry_after, r.retry_after_ns)
	return &BreakerOpenError{Unavailable: Unavailable{Reason: BreakerOpenReason, RetryAfter: d, HasRetryAfter: has},
		State: State(r.state), Episode: uint32(r.episode)}
}

// Allow asks to make a call: it admits it (closed, disabled, or as a due probe) or refuses it
// with a *BreakerOpenError. This is the only act of admission: an admitted probe is spent
// even if the call is never made, so never use Allow as a "ready?" check. A nil b is an
// *Error matching ErrInvalidInput (field breaker).
func (b *Breaker) Allow() (p *Permit, err error) {
	// Small enough to be inlined, so that a caller whose permit does not escape keeps it on
	// its stack: the healthy path then allocates nothing. A refusal never allocates one.
	var c C.holdoff_permit
	if err = b.admit(&c); err == nil {
		p = &Permit{c: c}
	}
	return p, err
}

// admit writes a permit to c, or returns the refusal as a *BreakerOpenError, or another error
// (admitOrRefuse).
func (b *Breaker) admit(c *C.holdoff_permit) error {
	var r refusal
	if ok, err := b.admitOrRefuse(c, &r); ok || err != nil {
		return err
	}
	return r.err()
}

// TryAllow asks to make a call, as Allow does, without making an error value when refused: it
// admits the call (closed, disabled, or as a due probe) and returns its permit and true, or
// refuses it and returns a zero Permit and false. Record an admitted call's permit (&p) exactly
// once, as Allow's, and not through copies: the permit carries its recorded flag, so a copy
// recorded again is not refused as a second record. A refusal is counted as Allow's is (the snapshot's Refusals, the metrics)
// and, while open on the shared system clock, costs one clock reading and no allocation. Use
// Allow instead to learn why a call was refused: its *BreakerOpenError carries the state, the
// episode and the time to the next probe (RetryAfter).
//
// False also when the breaker cannot admit at all: a nil b, or after Close (Err then says
// which, as the error Allow would return), or a failure of the C library itself (a bug in
// holdoff, which Allow returns as an error). Like Allow, it is an act of admission: an
// admitted probe is spent even if the call is never made.
func (b *Breaker) TryAllow() (p Permit, ok bool) {
	var r refusal
	ok, _ = b.admitOrRefuse(&p.c, &r)
	return p, ok
}

// Err is nil while the breaker can admit calls, and the error Allow would return when it
// cannot: an *Error matching ErrClosed after Close, or one matching ErrInvalidInput (field
// breaker) for a nil b. TryAllow returns false in both cases.
func (b *Breaker) Err() error {
	if b == nil {
		return nilErr("breaker")
	}
	return b.alive()
}

// admitOrRefuse is the admission of Allow and TryAllow. True: it wrote a permit to c, admitted
// on the word when it can be, else by the library. False with a nil error: refused, the refusal
// in r, decided in place when it can be, else by the library. False with an error: a nil b,
// ErrClosed after Close, or the library's failure.
func (b *Breaker) admitOrRefuse(c *C.holdoff_permit, r *refusal) (bool, error) {
	if b == nil {
		return false, nilErr("breaker")
	}
	// One load of the handle's state for both decisions on the word.
	s := b.h.state.Load()
	if b.fastAdmit(s, c) {
		return true, nil
	}
	if b.refuse(s, r) {
		return false, nil
	}
	h, held, err := b.use()
	if err != nil {
		return false, err
	}
	countLibraryCall()
	var cr C.holdoff_refusal
	st := C.holdoff_breaker_allow(h, c, &cr)
	b.done(held)
	switch st {
	case C.HOLDOFF_STATUS_OK:
		return true, nil
	case C.HOLDOFF_STATUS_BREAKER_OPEN:
		r.fromC(&cr)
		return false, nil
	}
	return false, errOf(st)
}

// Record reports the outcome of a call admitted by Allow. Errors: ErrForeignPermit (another
// breaker issued it; it stays usable), ErrPermitAlreadyRecorded; an *Error matching
// ErrInvalidInput naming breaker or permit when it is nil, or outcome.delay for a negative
// delay.
func (b *Breaker) Record(p *Permit, o Outcome) (Effect, error) {
	// fastSuccess by hand: one call less on the healthy path.
	if b != nil && p != nil && fastRecordable(o) && p.c.raw_probe == 0 {
		if id, open := b.fastID(); open && uint32(p.c.raw_breaker) == id {
			w := atomic.LoadUint64(b.word)
			runtime.KeepAlive(b)
			if w == uint64(p.c.raw_episode)<<32 && p.markRecorded() {
				return Counted, nil
			}
		}
	}
	return b.record(p, o)
}

// record is Record through the library.
func (b *Breaker) record(p *Permit, o Outcome) (Effect, error) {
	switch {
	case b == nil:
		return 0, nilErr("breaker")
	case p == nil:
		return 0, nilErr("permit")
	}
	kind, ns, err := o.c()
	if err != nil {
		return 0, err
	}
	h, held, err := b.use()
	if err != nil {
		return 0, err
	}
	countLibraryCall()
	var effect C.uint32_t
	st := C.holdoff_breaker_record(h, &p.c, kind, ns, &effect)
	b.done(held)
	if st != C.HOLDOFF_STATUS_OK {
		return 0, errOf(st)
	}
	return Effect(effect), nil
}

// Do makes one call through the breaker, with no retry: if refused, it returns a
// *BreakerOpenError without calling fn; otherwise it calls fn with ctx and records what fn
// returned, classified as Policy.Do classifies it (OutcomeOf), and returns fn's error. A
// panic in fn (or runtime.Goexit) is a programming error: the call is recorded as cancelled
// (a probe frees its slot) and the panic goes on. An AsRetryLater with a negative delay is
// recorded as cancelled too, and returned as an error matching ErrInvalidInput joined with
// fn's error. A nil b, ctx or fn is an *Error matching ErrInvalidInput naming it (breaker, ctx,
// fn), before anything is admitted.
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error) error {
	switch {
	case b == nil:
		return nilErr("breaker")
	case ctx == nil:
		return nilErr("ctx")
	case fn == nil:
		return nilErr("fn")
	}
	// The handle for the whole call: a Close meanwhile lets it record its outcome.
	h, held, err := b.use()
	if err != nil {
		return err
	}
	var p Permit
	if s := b.h.state.Load(); !b.fastAdmit(s, &p.c) {
		var ir refusal
		if b.refuse(s, &ir) {
			b.done(held)
			return ir.err()
		}
		countLibraryCall()
		var r C.holdoff_refusal
		switch st := C.holdoff_breaker_allow(h, &p.c, &r); st {
		case C.HOLDOFF_STATUS_OK:
		case C.HOLDOFF_STATUS_BREAKER_OPEN:
			b.done(held)
			return refusalErr(&r)
		default:
			b.done(held)
			return errOf(st)
		}
	}
	recorded := false
	defer func() {
		if !recorded { // fn panicked or exited the goroutine, or its outcome was not valid
			countLibraryCall()
			C.holdoff_breaker_record(h, &p.c, C.HOLDOFF_OUTCOME_CANCELLED, 0, nil)
		}
		b.done(held) // keeps b, and so a pinned handle, alive until here
	}()
	err = fn(ctx)
	_, o := classify(ctx, false, err, nil)
	if fastRecordable(o) && b.fastSuccess(&p) {
		recorded = true
		return err
	}
	kind, ns, oerr := o.c()
	if oerr != nil {
		return errors.Join(oerr, err)
	}
	countLibraryCall()
	if st := C.holdoff_breaker_record(h, &p.c, kind, ns, nil); st != C.HOLDOFF_STATUS_OK {
		// an outcome the core refuses: the deferred record frees the permit
		return errors.Join(errOf(st), err)
	}
	recorded = true
	return err
}

// Snapshot is a side-effect-free view of a breaker.
type Snapshot struct {
	State    State
	Episode  uint32
	Failures uint64
	// Recoveries is the consecutive current-episode probe answers so far.
	Recoveries     uint32
	ProbesInFlight uint32
	// RetryAfter is the time until the next probe while open or half-open (HasRetryAfter).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// ProbeReady reports whether Allow would admit a probe now.
	ProbeReady bool
	// Interval is the open interval in force while open or half-open (HasInterval).
	Interval      time.Duration
	HasInterval   bool
	Opens         uint64
	Closes        uint64
	Probes        uint64
	Refusals      uint64
	StaleAnswers  uint64
	EventsDropped uint64
}

// Snapshot views the breaker without side effects (it never admits or expires anything).
func (b *Breaker) Snapshot() Snapshot {
	if b == nil {
		nilPanic("breaker")
	}
	s, err := snapshotOf(b.h.mustAcquire())
	b.h.release()
	if err != nil {
		panic(err)
	}
	return s
}

func snapshotOf(h *C.holdoff_breaker) (Snapshot, error) {
	var s C.holdoff_snapshot
	if st := C.holdoff_breaker_snapshot(h, &s); st != C.HOLDOFF_STATUS_OK {
		return Snapshot{}, errOf(st)
	}
	ra, hasRA := optDur(s.has_retry_after, s.retry_after_ns)
	iv, hasIV := optDur(s.has_interval, s.interval_ns)
	return Snapshot{
		State: State(s.state), Episode: uint32(s.episode), Failures: uint64(s.failures),
		Recoveries: uint32(s.recoveries), ProbesInFlight: uint32(s.probes_in_flight),
		RetryAfter: ra, HasRetryAfter: hasRA, ProbeReady: s.probe_ready != 0, Interval: iv, HasInterval: hasIV,
		Opens: uint64(s.opens), Closes: uint64(s.closes), Probes: uint64(s.probes),
		Refusals: uint64(s.refusals), StaleAnswers: uint64(s.stale_answers), EventsDropped: uint64(s.events_dropped),
	}, nil
}

// StateChange is one state change (the core's StateChange).
type StateChange struct {
	// At is the time of the change on the breaker's clock (since its origin).
	At      time.Duration
	From    State
	To      State
	Episode uint32
	Reason  Reason
	// RequestedDelay is the provider's delay of a retry-later opening (HasRequestedDelay).
	RequestedDelay    time.Duration
	HasRequestedDelay bool
	// OpenFor is the time until the first probe of an opening (HasOpenFor).
	OpenFor    time.Duration
	HasOpenFor bool
}

// DrainEvents takes the state changes queued since the last call, in order. Poll it; the C
// library never calls back (it keeps at most 1024 and counts the dropped in the snapshot).
func (b *Breaker) DrainEvents() []StateChange {
	if b == nil {
		nilPanic("breaker")
	}
	// One use for the whole drain: a Close between passes must not lose the events already
	// taken from the queue.
	h := b.h.mustAcquire()
	defer b.h.release()
	var buf [32]C.holdoff_state_change
	var out []StateChange
	for {
		var n C.size_t
		st := C.holdoff_breaker_drain_events(h, &buf[0], C.size_t(len(buf)), &n)
		if st != C.HOLDOFF_STATUS_OK {
			panic(errOf(st))
		}
		for _, e := range buf[:n] {
			rd, hasRD := optDur(e.has_requested_delay, e.requested_delay_ns)
			of, hasOF := optDur(e.has_open_for, e.open_for_ns)
			out = append(out, StateChange{At: dur(e.at_ns), From: State(e.from), To: State(e.to), Episode: uint32(e.episode),
				Reason: Reason(e.reason), RequestedDelay: rd, HasRequestedDelay: hasRD, OpenFor: of, HasOpenFor: hasOF})
		}
		if int(n) < len(buf) {
			return out
		}
		if testHookDrainPass != nil {
			testHookDrainPass()
		}
	}
}

// testHookDrainPass, when set by a test, runs between two passes of DrainEvents (to Close the
// breaker there). Nil outside tests.
var testHookDrainPass func()

// ForceOpen refuses every call until Reset. Starts a new episode.
func (b *Breaker) ForceOpen() {
	if b == nil {
		nilPanic("breaker")
	}
	C.holdoff_breaker_force_open(b.h.mustAcquire())
	b.h.release()
}

// Disable admits every call and never trips until Reset (outcomes are still counted).
func (b *Breaker) Disable() {
	if b == nil {
		nilPanic("breaker")
	}
	C.holdoff_breaker_disable(b.h.mustAcquire())
	b.h.release()
}

// Reset closes the breaker with fresh counts. Answers to earlier permits become stale.
func (b *Breaker) Reset() {
	if b == nil {
		nilPanic("breaker")
	}
	C.holdoff_breaker_reset(b.h.mustAcquire())
	b.h.release()
}

// The bounds of a breaker group (WithMaxKeys).
const (
	// DefaultMaxKeys is the bound of a group built without WithMaxKeys (or from a
	// configuration without group.max_keys).
	DefaultMaxKeys = C.HOLDOFF_GROUP_DEFAULT_MAX_KEYS
	// MaxKeysLimit is the largest bound a group accepts.
	MaxKeysLimit = C.HOLDOFF_GROUP_MAX_KEYS_LIMIT
)

// BreakerGroup holds one breaker per upstream key (host, registry, provider, tenant), created
// on first use from one template, each with its own jitter seed mixed with its key.
//
// It is bounded, because keys often come from request data: it keeps at most MaxKeys breakers
// (DefaultMaxKeys unless built with WithMaxKeys). A new key at a full group evicts the least
// recently used idle breaker (closed, no failure counted); open, half-open, forced-open and
// disabled breakers, and closed ones counting failures, are never evicted. With none idle, the
// new key gets an overflow breaker the group does not keep: no call fails because the group is
// full. Snapshot counts evictions and overflows.
type BreakerGroup struct {
	h handleRef[*C.holdoff_breaker_group]
}

func freeGroup(p *C.holdoff_breaker_group) { C.holdoff_breaker_group_free(p) }

func wrapGroup(p *C.holdoff_breaker_group) *BreakerGroup {
	g := &BreakerGroup{}
	g.h.init(p, &kindBreakerGroup)
	g.h.cleanup = runtime.AddCleanup(g, freeGroup, p)
	return g
}

// NewBreakerGroup creates an empty group of at most DefaultMaxKeys breakers, or of the bound
// WithMaxKeys gives; the template and the bound are validated now. Errors: an *Error matching
// ErrInvalidConfig whose Field names the invalid field (breaker.*, or group.max_keys for a
// bound outside 1..MaxKeysLimit).
func NewBreakerGroup(template BreakerConfig, opts ...Option) (*BreakerGroup, error) {
	// A template with a Fleet is refused by the core (field fleet): groups stay local.
	spec := withFleet(map[string]any{"breaker": template.spec()}, template.Fleet)
	if o := optionsOf(opts); o.hasMaxKeys {
		spec["group"] = map[string]any{"max_keys": o.maxKeys}
	}
	c, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.newBreakerGroup(opts)
}

// Get returns the breaker the group holds for key now, created on first use, and marks the key
// most recently used; from a full group with nothing idle to evict, an overflow breaker the
// group does not keep (a new one each time). Ask the group for each call's breaker and record
// the permit on the *Breaker that admitted it: one kept longer may be a breaker the group has
// since evicted (it stays usable, but the group no longer hands it out).
//
// Each Get returns a new *Breaker value with its own handle on the core's breaker: the C
// library gives a handle per lookup and cannot tell whether an earlier one is still the
// group's breaker, so none is cached. Compare breakers by behaviour, not by pointer. Close it when done with it, or leave it to its
// cleanup; the group's Close does not close it, and it stays usable after the group is
// closed. Errors: an *Error matching ErrInvalidInput when key is not valid UTF-8 (Go strings
// may hold any bytes; keys are text in every holdoff SDK), or ErrClosed after Close.
func (g *BreakerGroup) Get(key string) (*Breaker, error) {
	if g == nil {
		return nil, nilErr("group")
	}
	h, err := g.h.acquire()
	if err != nil {
		return nil, err
	}
	defer g.h.release()
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	var p *C.holdoff_breaker
	if err := detailed(func() C.holdoff_status {
		return C.holdoff_breaker_group_get(h, ckey, C.size_t(len(key)), &p)
	}); err != nil {
		return nil, err
	}
	return wrapBreaker(p, true, false), nil
}

// Len is the number of breakers the group keeps (overflow breakers are not kept). It panics
// with ErrClosed after Close.
func (g *BreakerGroup) Len() int {
	if g == nil {
		nilPanic("group")
	}
	var n C.size_t
	st := C.holdoff_breaker_group_len(g.h.mustAcquire(), &n)
	g.h.release()
	if st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	return int(n)
}

// GroupSnapshot is a side-effect-free view of a group's counts, read together.
type GroupSnapshot struct {
	// Keys is the number of breakers the group keeps now (at most MaxKeys).
	Keys int
	// MaxKeys is the group's bound.
	MaxKeys int
	// Evictions counts idle breakers evicted to make room for a new key since the group was
	// made.
	Evictions uint64
	// Overflows counts overflow breakers handed out (not kept) because nothing could be
	// evicted.
	Overflows uint64
}

// Snapshot reads the group's counts without side effects (it marks no key used). It panics
// with ErrClosed after Close.
func (g *BreakerGroup) Snapshot() GroupSnapshot {
	if g == nil {
		nilPanic("group")
	}
	var s C.holdoff_group_snapshot
	st := C.holdoff_breaker_group_snapshot(g.h.mustAcquire(), &s)
	g.h.release()
	if st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	return GroupSnapshot{Keys: int(s.keys), MaxKeys: int(s.max_keys), Evictions: uint64(s.evictions),
		Overflows: uint64(s.overflows)}
}

// Keys returns the keys the group keeps now, sorted by their bytes, copied at one moment
// without side effects (it marks no key used). It panics with ErrClosed after Close.
func (g *BreakerGroup) Keys() []string {
	if g == nil {
		nilPanic("group")
	}
	var list *C.holdoff_key_list
	st := C.holdoff_breaker_group_keys(g.h.mustAcquire(), &list)
	g.h.release()
	if st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	defer C.holdoff_key_list_free(list)
	var n C.size_t
	if st := C.holdoff_key_list_len(list, &n); st != C.HOLDOFF_STATUS_OK {
		panic(errOf(st))
	}
	keys := make([]string, int(n))
	for i := range keys {
		var k *C.char
		var klen C.size_t
		if st := C.holdoff_key_list_get(list, C.size_t(i), &k, &klen); st != C.HOLDOFF_STATUS_OK {
			panic(errOf(st))
		}
		keys[i] = C.GoStringN(k, C.int(klen))
	}
	return keys
}

// Close releases the group's handle. Breakers Get returned stay usable (each has its own
// handle). Safe to call twice and concurrently with other methods: calls in flight finish on
// the live handle, later calls return (or panic with) ErrClosed.
func (g *BreakerGroup) Close() error {
	if g == nil {
		return nilErr("group")
	}
	g.h.close()
	return nil
}

var kindBreaker = handleKind[*C.holdoff_breaker]{"Breaker", freeBreaker}

var kindBreakerGroup = handleKind[*C.holdoff_breaker_group]{"BreakerGroup", freeGroup}
