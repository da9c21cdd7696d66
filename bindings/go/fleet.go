package holdoff

// #include <stdlib.h>
// #include "holdoff.h"
import "C"

import (
	"time"
	"unsafe"
)

// FleetConfig shares a breaker's state with every worker that uses the same store and key
// (docs/fleet.md): a trip or a retry-later seen by one worker opens the breaker of all of
// them, and the fleet sends one probe per interval in total. Calls never wait on the store:
// a Redis fleet syncs in a background thread of the C library, started with the breaker and
// stopped when the breaker (and every policy using it) is closed. Set it on BreakerConfig.Fleet;
// a zero duration takes the core's default. Errors name the core's field (fleet.url, fleet.key,
// fleet.refresh, fleet.fallback_after, fleet.timeout, fleet.ttl) in an *Error matching
// ErrInvalidConfig.
type FleetConfig struct {
	// URL names the store: redis://[user:password@]host[:port][/db], rediss://...,
	// unix:///path/redis.sock[?db=N], or memory://<name> (this process only; no thread:
	// tick it with Breaker.SyncFleet).
	URL string
	// Key names the shared record (the upstream: "payments-api"): 1..200 bytes, no whitespace.
	Key string
	// Refresh is the period of the background sync (default 50ms).
	Refresh time.Duration
	// FallbackAfter is how long without a successful sync before the breaker detaches and runs
	// as a local breaker (default 1s); the next successful sync attaches it again.
	FallbackAfter time.Duration
	// Timeout bounds one round trip to the store (default 50ms).
	Timeout time.Duration
	// TTL is how long the shared record lives unused (default 1h).
	TTL time.Duration
}

func (f *FleetConfig) spec() map[string]any {
	m := map[string]any{"url": f.URL, "key": f.Key}
	for k, d := range map[string]time.Duration{"refresh_ms": f.Refresh, "fallback_after_ms": f.FallbackAfter,
		"timeout_ms": f.Timeout, "ttl_ms": f.TTL} {
		if d != 0 {
			m[k] = ms(d)
		}
	}
	return m
}

// withFleet adds the fleet part to a configuration spec when f is set.
func withFleet(spec map[string]any, f *FleetConfig) map[string]any {
	if f != nil {
		spec["fleet"] = f.spec()
	}
	return spec
}

// FleetState is the state of a fleet's shared record.
type FleetState uint32

// Fleet states.
const (
	FleetClosed FleetState = C.HOLDOFF_FLEET_STATE_CLOSED
	FleetOpen   FleetState = C.HOLDOFF_FLEET_STATE_OPEN
)

// String is the stable name: closed, open.
func (s FleetState) String() string {
	return cname(C.holdoff_fleet_state_name(C.uint32_t(s)), "fleet_state", uint32(s))
}

// FleetFailure is why a sync's exchange with the store failed.
type FleetFailure uint32

// Fleet sync failures.
const (
	// FleetNoFailure: the exchange succeeded.
	FleetNoFailure FleetFailure = C.HOLDOFF_FLEET_ERROR_NONE
	// FleetUnavailable: the store could not be reached or did not answer within Timeout.
	FleetUnavailable FleetFailure = C.HOLDOFF_FLEET_ERROR_UNAVAILABLE
	// FleetCorrupt: the store holds a record that is not a fleet record (refused, never used).
	FleetCorrupt FleetFailure = C.HOLDOFF_FLEET_ERROR_CORRUPT
)

// FleetSync is what one Breaker.SyncFleet did. The record's fields are set when HasRecord.
type FleetSync struct {
	// OK: the exchange succeeded and the record was applied to the breaker.
	OK bool
	// Attached: the breaker follows the fleet after this sync (false: a local breaker).
	Attached bool
	// Detached: this sync detached the breaker (FallbackAfter without a successful sync).
	Detached bool
	// Reattached: this sync attached a detached breaker again.
	Reattached bool
	// Granted: this sync claimed the fleet's probe and got it (the breaker may probe now).
	Granted bool
	// Sent is the operations sent to the store.
	Sent int
	// Failure says why the exchange failed (FleetNoFailure when OK).
	Failure   FleetFailure
	HasRecord bool
	// State, Episode and Recoveries are the shared record's (Episode 0: never opened).
	State      FleetState
	Episode    uint64
	Recoveries uint32
	// NextProbeAt is the fleet's next probe time on the store's clock (since its epoch).
	NextProbeAt time.Duration
}

// SyncFleet ticks the breaker's fleet now: sends what the breaker queued (a trip, a
// retry-later, a probe's answer, a claim), makes one exchange with the store (bounded by
// FleetConfig.Timeout) and applies the shared record. A Redis fleet does this in the
// background; SyncFleet is for tests and memory:// fleets. A failing store is in the result
// (OK false, Failure), not an error. Errors: an *Error matching ErrInvalidInput (field
// breaker) when the breaker has no fleet; ErrClosed after Close.
func (b *Breaker) SyncFleet() (FleetSync, error) {
	if b == nil {
		return FleetSync{}, nilErr("breaker")
	}
	h, err := b.h.acquire()
	if err != nil {
		return FleetSync{}, err
	}
	defer b.h.release()
	var r C.holdoff_fleet_sync
	if err := detailed(func() C.holdoff_status { return C.holdoff_breaker_sync_fleet(h, &r) }); err != nil {
		return FleetSync{}, err
	}
	return FleetSync{OK: r.ok != 0, Attached: r.attached != 0, Detached: r.detached != 0,
		Reattached: r.reattached != 0, Granted: r.granted != 0, Sent: int(r.sent),
		Failure: FleetFailure(r.error), HasRecord: r.has_record != 0, State: FleetState(r.fleet_state),
		Episode: uint64(r.fleet_episode), Recoveries: uint32(r.fleet_recoveries),
		NextProbeAt: time.Duration(r.next_probe_at_ms) * time.Millisecond}, nil
}

// FleetAttached reports whether the breaker follows its fleet now: false without a fleet, or
// while detached (FallbackAfter without a successful sync). Panics with ErrClosed after Close.
func (b *Breaker) FleetAttached() bool {
	if b == nil {
		nilPanic("breaker")
	}
	var out C.uint8_t
	C.holdoff_breaker_fleet_attached(b.h.mustAcquire(), &out)
	b.h.release()
	return out != 0
}

// SyncFleet ticks the fleet of the policy's breaker (Breaker.SyncFleet).
func (p *Policy) SyncFleet() (FleetSync, error) {
	if p == nil {
		return FleetSync{}, nilErr("policy")
	}
	return p.breaker.SyncFleet()
}

// MemoryStoreAction is what MemoryStoreControl does.
type MemoryStoreAction uint32

// Memory store actions.
const (
	// StoreDown makes every exchange fail until StoreUp.
	StoreDown MemoryStoreAction = C.HOLDOFF_MEMORY_STORE_ACTION_DOWN
	// StoreUp makes exchanges work again; records are kept.
	StoreUp MemoryStoreAction = C.HOLDOFF_MEMORY_STORE_ACTION_UP
	// StoreFlush wipes every record, as a Redis FLUSHDB or an expiry would.
	StoreFlush MemoryStoreAction = C.HOLDOFF_MEMORY_STORE_ACTION_FLUSH
	// StoreReset wipes every record and brings the store up: a fresh store.
	StoreReset MemoryStoreAction = C.HOLDOFF_MEMORY_STORE_ACTION_RESET
)

// MemoryStoreControl is for tests: it acts on the in-process store memory://<name> that
// fleets with that URL share. Errors: an *Error matching ErrInvalidInput naming action for an
// unknown action.
func MemoryStoreControl(name string, action MemoryStoreAction) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return detailed(func() C.holdoff_status {
		return C.holdoff_memory_store_control(cname, C.size_t(len(name)), C.uint32_t(action))
	})
}
