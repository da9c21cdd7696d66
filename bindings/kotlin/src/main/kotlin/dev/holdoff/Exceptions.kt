// What the retry helpers throw of their own, and what an operation throws to tell them something.

package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlin.time.Duration

/**
 * The upstream is unavailable for this call: the breaker refused it ([BreakerOpenException]) or
 * the helper gave up ([GiveUpException]). The one type to catch for "try again later".
 *
 * @property reason why, the core's give-up reason (`GiveUpReason.BREAKER_OPEN` for a refusal);
 *   `reason.stableName()` is its stable name.
 * @property attempts attempts made (0 when the first one was refused).
 * @property retryAfter when trying again could help (the breaker's next probe, the server's
 *   delay), or null when nothing says (a breaker forced open, retries used up).
 * @property serverDelay the server's own delay (Retry-After and the like), if the last answer
 *   carried one, before the budget's cap.
 * @property capped whether the server's delay was above the budget's cap.
 * @property lastResult the last attempt's value (for `executeHttp`, its response) when the last
 *   attempt returned one; the last attempt's exception is the [cause] instead.
 */
sealed class UpstreamUnavailableException(
    message: String,
    val reason: GiveUpReason,
    val attempts: Long,
    val retryAfter: Duration?,
    val serverDelay: Duration?,
    val capped: Boolean,
    val lastResult: Any?,
    cause: Throwable?,
) : Exception(message, cause)

/**
 * The breaker refused the call: a first attempt while it is open, or a retry that would wait for
 * it past what is left of the budget or the total timeout. [retryAfter] is the time until its
 * next probe (null while forced open).
 */
class BreakerOpenException(
    attempts: Long,
    retryAfter: Duration?,
    lastResult: Any? = null,
    cause: Throwable? = null,
) : UpstreamUnavailableException(
    message = "the breaker is open (" +
        (retryAfter?.let { "next probe in $it" } ?: "forced open") + ") after $attempts attempts",
    reason = GiveUpReason.BREAKER_OPEN,
    attempts = attempts,
    retryAfter = retryAfter,
    serverDelay = null,
    capped = false,
    lastResult = lastResult,
    cause = cause,
)

/**
 * The helper gave up: retries or budget spent, quota empty, total timeout, a Retry-After above
 * the cap (with `giveUpAboveCap`), or failures until the end (a 500 response is [lastResult]).
 */
class GiveUpException(
    gaveUp: GaveUp,
    lastResult: Any? = null,
    cause: Throwable? = null,
) : UpstreamUnavailableException(
    message = "gave up after ${gaveUp.attempts} attempts: ${gaveUp.reason.stableName()}" +
        (gaveUp.retryAfter?.let { ", retry after $it" } ?: ""),
    reason = gaveUp.reason,
    attempts = gaveUp.attempts,
    retryAfter = gaveUp.retryAfter,
    serverDelay = gaveUp.serverDelay,
    capped = gaveUp.capped,
    lastResult = lastResult,
    cause = cause,
)

/**
 * Thrown by an operation to say that the upstream asked to be left alone for [delay] (a
 * rate limit, a maintenance window): the breaker opens for that delay and the budget waits it,
 * never shorter. A negative delay is refused with [InvalidInputException] naming
 * `outcome.retry_later`.
 */
class RetryLaterException(
    val delay: Duration,
    message: String? = null,
    cause: Throwable? = null,
) : Exception(message ?: "the upstream asked to retry in $delay", cause)

/**
 * How an attempt that outlived its time limit is cancelled: its own job is cancelled with this
 * (the caller's is not), and the attempt is recorded as a timeout. A give-up after it carries it
 * as its cause. [limit] is the attempt's time limit.
 */
class AttemptTimeoutException(val limit: Duration) :
    CancellationException("the attempt exceeded its time limit of $limit")
