package holdoff

// #include <stdlib.h>
// #include <string.h>
// #include "holdoff.h"
import "C"

import (
	"fmt"
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

// HintSource is the header a hint came from.
type HintSource uint32

// Hint sources.
const (
	SourceRetryAfter      HintSource = C.HOLDOFF_HINT_SOURCE_RETRY_AFTER
	SourceRateLimitReset  HintSource = C.HOLDOFF_HINT_SOURCE_RATELIMIT_RESET
	SourceXRateLimitReset HintSource = C.HOLDOFF_HINT_SOURCE_X_RATELIMIT_RESET
	SourceNone            HintSource = C.HOLDOFF_HINT_SOURCE_NONE
)

// String is the stable name: retry_after, ratelimit_reset, x_ratelimit_reset, none.
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

func unixNanos(t time.Time) C.uint64_t {
	if ns := t.UnixNano(); ns > 0 {
		return C.uint64_t(ns)
	}
	return 0
}

// ParseRetryAfter parses one Retry-After value (RFC 9110 §10.2.3): delay-seconds (decimals
// rounded up to the millisecond) or an HTTP-date compared with now (a past date is a zero
// delay). Garbage is Unusable, never an error.
func ParseRetryAfter(value string, now time.Time) Hint {
	var r C.holdoff_retry_after
	cv := C.CString(value)
	defer C.free(unsafe.Pointer(cv))
	C.holdoff_parse_retry_after(cv, C.size_t(len(value)), unixNanos(now), &r)
	return hintOf(&r)
}

// HintFromHeaders reads the delay hint of a response: Retry-After (every field; disagreeing
// ones are Conflicting), else RateLimit-Reset, else X-RateLimit-Reset.
func HintFromHeaders(headers []Header, now time.Time) Hint {
	arr, n, free := cHeaders(headers)
	defer free()
	var r C.holdoff_retry_after
	C.holdoff_hint_from_headers(arr, n, unixNanos(now), &r)
	return hintOf(&r)
}

// Classification is a classified HTTP response.
type Classification struct {
	// Outcome is what the breaker and budget are told.
	Outcome Outcome
	// Hint is the delay hint as parsed (even when the status does not use it).
	Hint Hint
}

func classificationOf(c *C.holdoff_classification) Classification {
	return Classification{Outcome: Outcome{Kind: OutcomeKind(c.outcome), Delay: dur(c.retry_later_ns)},
		Hint: hintOf(&c.hint)}
}

// Classifier turns an HTTP response into an Outcome: 1xx-3xx success; 429/503 with a usable
// hint retry-later; 408, 410, 429, 460 and 5xx except 501, 505, 511 failure; the rest answers.
type Classifier struct {
	h handleRef[*C.holdoff_classifier]
}

func freeClassifier(p *C.holdoff_classifier) { C.holdoff_classifier_free(p) }

func wrapClassifier(p *C.holdoff_classifier) *Classifier {
	c := &Classifier{}
	c.h.init(p, "Classifier", freeClassifier)
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
	c.h.close()
	return nil
}

func cStatus(status int) C.uint32_t {
	if status < 0 || status > 1<<31 {
		return C.uint32_t(1<<32 - 1) // refused by the core like any status outside 100..599
	}
	return C.uint32_t(status)
}

// Classify classifies a response; now is the wall time for HTTP-dates. Errors:
// ErrInvalidInput for a status outside 100..599.
func (c *Classifier) Classify(status int, headers []Header, now time.Time) (Classification, error) {
	h, err := c.h.acquire()
	if err != nil {
		return Classification{}, err
	}
	defer c.h.release()
	arr, n, free := cHeaders(headers)
	defer free()
	var out C.holdoff_classification
	st := C.holdoff_classifier_classify(h, cStatus(status), arr, n, unixNanos(now), &out)
	if st != C.HOLDOFF_STATUS_OK {
		return Classification{}, errOf(st)
	}
	return classificationOf(&out), nil
}

func (c Classification) String() string { return fmt.Sprintf("%s %v", c.Outcome.Kind, c.Outcome.Delay) }
