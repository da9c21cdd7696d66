package holdoff

// #include <stdlib.h>
// #include <string.h>
// #include "holdoff.h"
import "C"

import (
	"fmt"
	"math"
	"net/http"
	"runtime"
	"time"
	"unsafe"
)

// Header is one HTTP header field (names compare case-insensitively; repeated names count).
type Header struct {
	Name, Value string
}

// HeadersOf flattens an http.Header.
func HeadersOf(h http.Header) []Header {
	var out []Header
	for name, values := range h {
		for _, v := range values {
			out = append(out, Header{name, v})
		}
	}
	return out
}

// cHeaders copies headers into C memory (cgo forbids passing Go memory that holds Go
// pointers); free releases it.
func cHeaders(hs []Header) (*C.holdoff_header, C.size_t, func()) {
	if len(hs) == 0 {
		return nil, 0, func() {}
	}
	size := C.size_t(len(hs)) * C.size_t(unsafe.Sizeof(C.holdoff_header{}))
	arr := (*C.holdoff_header)(C.malloc(size))
	list := unsafe.Slice(arr, len(hs))
	var strs []unsafe.Pointer
	for i, h := range hs {
		n, v := C.CString(h.Name), C.CString(h.Value)
		strs = append(strs, unsafe.Pointer(n), unsafe.Pointer(v))
		list[i] = C.holdoff_header{name: n, name_len: C.size_t(len(h.Name)), value: v, value_len: C.size_t(len(h.Value))}
	}
	return arr, C.size_t(len(hs)), func() {
		for _, s := range strs {
			C.free(s)
		}
		C.free(unsafe.Pointer(arr))
	}
}

// Unusable says why a delay hint cannot be used.
type Unusable uint32

// Reasons a hint is unusable.
const (
	Usable      Unusable = C.HOLDOFF_UNUSABLE_NONE
	Missing     Unusable = C.HOLDOFF_UNUSABLE_MISSING
	Malformed   Unusable = C.HOLDOFF_UNUSABLE_MALFORMED
	Signed      Unusable = C.HOLDOFF_UNUSABLE_SIGNED
	Conflicting Unusable = C.HOLDOFF_UNUSABLE_CONFLICTING
)

// String is the stable name: none, missing, malformed, signed, conflicting.
func (u Unusable) String() string {
	return cname(C.holdoff_unusable_name(C.uint32_t(u)), "unusable", uint32(u))
}

// HintSource is the header a hint came from. The values are the C ABI's stable codes, not
// the order of precedence (HintFromHeaders gives that).
type HintSource uint32

// Hint sources.
const (
	SourceRetryAfter      HintSource = C.HOLDOFF_HINT_SOURCE_RETRY_AFTER
	SourceRateLimitReset  HintSource = C.HOLDOFF_HINT_SOURCE_RATELIMIT_RESET
	SourceXRateLimitReset HintSource = C.HOLDOFF_HINT_SOURCE_X_RATELIMIT_RESET
	SourceNone            HintSource = C.HOLDOFF_HINT_SOURCE_NONE
	// SourceRetryAfterMs is retry-after-ms (milliseconds).
	SourceRetryAfterMs HintSource = C.HOLDOFF_HINT_SOURCE_RETRY_AFTER_MS
	// SourceXMsRetryAfterMs is x-ms-retry-after-ms (milliseconds).
	SourceXMsRetryAfterMs HintSource = C.HOLDOFF_HINT_SOURCE_X_MS_RETRY_AFTER_MS
	// SourceRateLimit is RateLimit, the IETF draft's structured field (its t parameter,
	// seconds).
	SourceRateLimit HintSource = C.HOLDOFF_HINT_SOURCE_RATELIMIT
)

// String is the core's stable name: retry_after_ms, x_ms_retry_after_ms, retry_after,
// ratelimit, ratelimit_reset, x_ratelimit_reset, none.
func (s HintSource) String() string {
	return cname(C.holdoff_hint_source_name(C.uint32_t(s)), "source", uint32(s))
}

// Hint is a parsed delay hint: Delay when Unusable is Usable.
type Hint struct {
	Delay    time.Duration
	Unusable Unusable
	Source   HintSource
}

func hintOf(r *C.holdoff_retry_after) Hint {
	return Hint{Delay: dur(r.delay_ns), Unusable: Unusable(r.unusable), Source: HintSource(r.source)}
}

// wallNanos converts a wall time for the C ABI (nanoseconds since the Unix epoch). A zero
// time.Time (year 1: a forgotten argument, not a time) and any time outside 1970-01-01 ..
// 2262-04-11 UTC (what the ABI's unsigned nanoseconds and time.Time.UnixNano can hold) are
// refused with an *Error matching ErrInvalidInput naming field, never moved to the nearest
// representable time.
func wallNanos(field string, t time.Time) (C.uint64_t, error) {
	if t.IsZero() {
		return 0, inputErr(field, "must be set: the zero time.Time is not a wall time (pass time.Now())")
	}
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, inputErr(field, "must be between 1970-01-01 and 2262-04-11 UTC")
	}
	return C.uint64_t(t.UnixNano()), nil
}

// ParseRetryAfter parses one Retry-After value (RFC 9110 §10.2.3): delay-seconds (decimals
// rounded up to the millisecond) or an HTTP-date compared with now (a past date is a zero
// delay). Garbage is Unusable, never an error. Errors: an *Error matching ErrInvalidInput
// (field now) for a zero now or one outside 1970-01-01 .. 2262-04-11 UTC.
func ParseRetryAfter(value string, now time.Time) (Hint, error) {
	ns, err := wallNanos("now", now)
	if err != nil {
		return Hint{}, err
	}
	var r C.holdoff_retry_after
	cv := C.CString(value)
	defer C.free(unsafe.Pointer(cv))
	if st := C.holdoff_parse_retry_after(cv, C.size_t(len(value)), ns, &r); st != C.HOLDOFF_STATUS_OK {
		return Hint{}, errOf(st)
	}
	return hintOf(&r), nil
}

// HintFromHeaders reads the delay hint of a response: the first present of retry-after-ms and
// x-ms-retry-after-ms (milliseconds, decimals rounded up), Retry-After (every field;
// disagreeing ones are Conflicting), RateLimit (its t), RateLimit-Reset and X-RateLimit-Reset
// (epoch seconds). A present field is the hint even when unusable; Source says which one it
// was (SourceNone without any). Every delay saturates at 2^32-1 seconds. Errors: as
// ParseRetryAfter for now.
func HintFromHeaders(headers []Header, now time.Time) (Hint, error) {
	ns, err := wallNanos("now", now)
	if err != nil {
		return Hint{}, err
	}
	arr, n, free := cHeaders(headers)
	defer free()
	var r C.holdoff_retry_after
	if st := C.holdoff_hint_from_headers(arr, n, ns, &r); st != C.HOLDOFF_STATUS_OK {
		return Hint{}, errOf(st)
	}
	return hintOf(&r), nil
}

// Classification is a classified HTTP response.
type Classification struct {
	// Outcome is what the breaker and budget are told.
	Outcome Outcome
	// Hint is the delay hint as parsed (even when the status does not use it).
	Hint Hint
	// ShouldRetry is the response's x-should-retry (true or false), when HasShouldRetry:
	// false makes any status from 400 up an answer, true makes an answer a failure (it never
	// changes a success, a broken status or a status the configuration lists; Outcome already
	// says the result).
	ShouldRetry    bool
	HasShouldRetry bool
}

func classificationOf(c *C.holdoff_classification) Classification {
	return Classification{Outcome: Outcome{Kind: OutcomeKind(c.outcome), Delay: dur(c.retry_later_ns)},
		Hint: hintOf(&c.hint), ShouldRetry: c.should_retry != 0, HasShouldRetry: c.has_should_retry != 0}
}

// Classifier turns an HTTP response into an Outcome: 1xx-3xx success; 429/503 with a usable
// hint retry-later; 408, 410, 429, 460 and 5xx except 501, 505, 511 failure; the rest answers;
// a status outside 100..599 (a 0, a 600, a 999: a broken upstream) fails whatever else the
// response says. The configured lists win over the default, failures first; then
// x-should-retry: false makes any status from 400 up an answer and x-should-retry: true makes
// an answer a failure.
type Classifier struct {
	h handleRef[*C.holdoff_classifier]
}

func freeClassifier(p *C.holdoff_classifier) { C.holdoff_classifier_free(p) }

func wrapClassifier(p *C.holdoff_classifier) *Classifier {
	c := &Classifier{}
	c.h.init(p, &kindClassifier)
	c.h.cleanup = runtime.AddCleanup(c, freeClassifier, p)
	return c
}

// NewClassifier creates a classifier. Errors: ErrInvalidConfig for a status outside 100..599.
func NewClassifier(cfg ClassifierConfig) (*Classifier, error) {
	c, err := parseSpec(map[string]any{"classifier": cfg.spec()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.NewClassifier()
}

// alive is nil, or an error matching ErrClosed once Close has run.
func (c *Classifier) alive() error { return c.h.alive() }

// Close releases the classifier's handle.
func (c *Classifier) Close() error {
	if c == nil {
		return nilErr("classifier")
	}
	c.h.close()
	return nil
}

// Classify classifies a response; now is the wall time for HTTP-dates. status is whatever
// integer the HTTP client gave, passed to the core as is: 0..999 is a status. Errors: an
// *Error matching ErrInvalidInput with Field "status" for a value outside 0..999 (-1, 1000,
// 70000), or Field "now" as for ParseRetryAfter, or Field "classifier" for a nil c.
func (c *Classifier) Classify(status int, headers []Header, now time.Time) (Classification, error) {
	if c == nil {
		return Classification{}, nilErr("classifier")
	}
	ns, err := wallNanos("now", now)
	if err != nil {
		return Classification{}, err
	}
	h, err := c.h.acquire()
	if err != nil {
		return Classification{}, err
	}
	defer c.h.release()
	arr, n, free := cHeaders(headers)
	defer free()
	var out C.holdoff_classification
	if err := detailed(func() C.holdoff_status {
		return C.holdoff_classifier_classify(h, C.int64_t(status), arr, n, ns, &out)
	}); err != nil {
		return Classification{}, err
	}
	return classificationOf(&out), nil
}

func (c Classification) String() string { return fmt.Sprintf("%s %v", c.Outcome.Kind, c.Outcome.Delay) }

var kindClassifier = handleKind[*C.holdoff_classifier]{"Classifier", freeClassifier}
