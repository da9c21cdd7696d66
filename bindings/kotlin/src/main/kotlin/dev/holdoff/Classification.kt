// How the helpers read an exception thrown by an attempt: the default table, and the one rule
// that puts the caller's own cancellation and deadlines above any classifier.

package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.TimeoutCancellationException
import java.io.IOException
import java.io.InterruptedIOException
import java.net.SocketTimeoutException

/**
 * The default classification of an exception thrown by an attempt (a `classify` argument of
 * `execute`, `executeHttp` and `Breaker.execute` replaces it; call it from yours for the rest):
 *
 * | exception | outcome |
 * |---|---|
 * | [RetryLaterException] | [Outcome.RetryLater] with its delay |
 * | [SocketTimeoutException], any other [InterruptedIOException], [TimeoutCancellationException] (`withTimeout`), [AttemptTimeoutException] | [Outcome.Timeout] |
 * | any other [CancellationException] | [Outcome.Cancelled] |
 * | any other [IOException] (OkHttp, Ktor, `ConnectException`, `UnknownHostException`) | [Outcome.Failure] |
 * | anything else | `null`: a programming error, re-thrown at once, unretried, moving nothing |
 *
 * A classifier may also say [Outcome.Answer] (a final answer thrown as an exception: re-thrown
 * unchanged, not retried) or [Outcome.Success].
 */
fun defaultOutcomeOf(error: Throwable): Outcome? = when (error) {
    is RetryLaterException -> Outcome.RetryLater(error.delay)
    is TimeoutCancellationException, is AttemptTimeoutException -> Outcome.Timeout
    is CancellationException -> Outcome.Cancelled
    is SocketTimeoutException, is InterruptedIOException -> Outcome.Timeout
    is IOException -> Outcome.Failure
    else -> null
}

/**
 * What an attempt that threw [error] came to. A deadline is a timeout whatever else is true;
 * when the caller itself is cancelled ([callerActive] false), anything else is the caller's
 * cancellation; otherwise [classify] decides (null: a programming error).
 */
internal fun attemptedOf(error: Throwable, classify: (Throwable) -> Outcome?, callerActive: Boolean): Attempted {
    val outcome = classify(error)
    return when {
        outcome == Outcome.Timeout -> Attempted.Raised(outcome)
        !callerActive || outcome == Outcome.Cancelled -> Attempted.Cancelled
        outcome == null -> Attempted.Bug
        else -> Attempted.Raised(outcome)
    }
}

/** What a breaker records for an attempt: a programming error moves nothing, like a cancellation. */
internal val Attempted.recorded: Outcome
    get() = when (this) {
        is Attempted.Returned -> outcome
        is Attempted.Raised -> outcome
        Attempted.Cancelled, Attempted.Bug -> Outcome.Cancelled
    }
