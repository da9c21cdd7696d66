// Kotlin names for the core's errors. uniffi generates them as the members of the sealed
// `HoldoffException` (so `catch (e: HoldoffException)` still takes every one of them); these
// aliases give each its `...Exception` name, the way the other bindings spell them.
// `HoldoffException.BreakerOpen` (from `Breaker.acquire()`) has no alias: `BreakerOpenException`
// is the helpers' refusal, an `UpstreamUnavailableException`.

package dev.holdoff

/** A configuration value the core refuses: `field` is its dotted path, `rule` says why. */
typealias InvalidConfigException = HoldoffException.InvalidConfig

/** An argument the core refuses (a `status` outside 0..999, a negative delay): `field`, `rule`. */
typealias InvalidInputException = HoldoffException.InvalidInput

/** A clock was set to a time before its present one. */
typealias ClockBackwardsException = HoldoffException.ClockBackwards

/** A permit or lease was recorded a second time. */
typealias PermitAlreadyRecordedException = HoldoffException.PermitAlreadyRecorded

/** A permit or lease was recorded on a breaker or quota that did not issue it. */
typealias ForeignPermitException = HoldoffException.ForeignPermit
