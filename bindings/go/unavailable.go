package holdoff

import (
	"fmt"
	"net/http"
	"time"
)

// Unavailable is what every "upstream unavailable" error carries: *BreakerOpenError and
// *GiveUpError embed it.
type Unavailable struct {
	// The fields are ordered by size, pointers first: 56 bytes, so a *BreakerOpenError is 64
	// (a size class) and the collector scans its first three words only.

	// Err is the last attempt's error (what Unwrap returns); nil when no attempt was made or
	// the last one returned (Do: its fn returned nil; DoHTTP: see Response).
	Err error
	// Response is DoHTTP's last response, when the last attempt returned one. Its Body is
	// yours to close (it is empty if the call had waited after it, which closed it).
	Response *http.Response
	// Attempts is the attempts made (0 when the first was refused).
	Attempts int
	// RetryAfter is when trying again could help (HasRetryAfter): the breaker's time to its
	// next probe; the server's delay for a rate-limit give-up; for a total timeout the open
	// breaker's wait, else the server's capped delay. None while forced open.
	RetryAfter time.Duration
	// ServerDelay is the server's own delay before the cap (HasServerDelay).
	ServerDelay time.Duration
	// Reason is why the call stopped (BreakerOpenReason for a refusal).
	Reason         GiveUpReason
	HasRetryAfter  bool
	HasServerDelay bool
	// Capped reports that the server's delay was above the budget's cap.
	Capped bool
}

// after says what the last attempt left: ": <error>", ": HTTP <status>", or nothing.
func (u *Unavailable) after() string {
	switch {
	case u.Err != nil:
		return ": " + u.Err.Error()
	case u.Response != nil:
		return ": HTTP " + u.Response.Status
	}
	return ""
}

// BreakerOpenError is the error of a refused call: Breaker.Allow and Breaker.Do refusing, Do
// and DoHTTP refused a first attempt, or a retry the breaker would keep waiting past the
// budget or the total timeout (then the last attempt's error or response is attached). It
// matches ErrBreakerOpen and ErrUpstreamUnavailable with errors.Is and unwraps to Err.
type BreakerOpenError struct {
	Unavailable
	// State is the breaker's state when it refused (read again for Do and DoHTTP, for
	// information: the breaker may have moved on).
	State State
	// Episode is the open episode's number.
	Episode uint32
}

func (e *BreakerOpenError) Error() string {
	msg := fmt.Sprintf("holdoff: breaker %s: calls refused until reset", e.State)
	if e.HasRetryAfter {
		msg = fmt.Sprintf("holdoff: breaker %s: retry after %v", e.State, e.RetryAfter)
	}
	if e.Attempts > 0 {
		msg += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return msg + e.after()
}

// Is matches ErrBreakerOpen and ErrUpstreamUnavailable.
func (e *BreakerOpenError) Is(target error) bool {
	return target == ErrBreakerOpen || target == ErrUpstreamUnavailable
}

// Unwrap returns the last attempt's error, if any.
func (e *BreakerOpenError) Unwrap() error { return e.Err }

// GiveUpError is returned by Do and DoHTTP when the policy gives up for Reason: retries,
// budget or quota spent, the total timeout, a Retry-After above the cap, 500s until the end.
// It matches ErrUpstreamUnavailable with errors.Is and unwraps to the last attempt's error
// (Err); DoHTTP attaches the last response instead when there was one.
type GiveUpError struct {
	Unavailable
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("holdoff: gave up after %d attempts (%s)", e.Attempts, e.Reason) + e.after()
}

// Is matches ErrUpstreamUnavailable.
func (e *GiveUpError) Is(target error) bool { return target == ErrUpstreamUnavailable }

// Unwrap returns the last attempt's error, if any.
func (e *GiveUpError) Unwrap() error { return e.Err }
