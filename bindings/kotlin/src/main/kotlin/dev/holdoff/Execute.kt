// The retry helpers, `execute` and `executeHttp`, and their one loop: the core's Execution
// decides (attempt, wait or finish, and what the caller gets); this file runs each attempt in its
// own job under its time limit, sleeps, calls the hooks and turns the verdict into a result or an
// exception.

package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.async
import kotlinx.coroutines.cancelChildren
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.delay
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlin.time.Duration

/** The core's default total timeout of a call through the helpers: 60 s. */
val DEFAULT_TOTAL_TIMEOUT: Duration =
    checkNotNull(defaultExecutionConfig().totalTimeout) { "the core has a default total timeout" }

/**
 * Runs [block] under this policy, retrying as the core decides: the breaker admits each attempt,
 * the budget and the quota decide whether to retry and how long to wait (a Retry-After is
 * honoured as given, never shortened), and the time limits bound each attempt and the call.
 *
 * Each attempt runs in its own child job: when it outlives its time limit that job is cancelled
 * with [AttemptTimeoutException] (the caller's is not) and the attempt is recorded as a timeout.
 * Blocking code inside [block] is not interrupted by that; wrap it in `runInterruptible`.
 *
 * What the caller gets:
 * * the value of the last attempt, when it succeeded or [classifyResult] called it a final
 *   [Outcome.Answer];
 * * the attempt's own exception, unchanged, when [classify] calls it a final answer, a success or
 *   a programming error (`null`: re-thrown at once, unretried, the attempt recorded as cancelled
 *   so it moves nothing);
 * * [BreakerOpenException] when the breaker refuses (a first attempt, or a retry it would keep
 *   waiting past the budget or the total timeout);
 * * [GiveUpException] for any other give-up (retries, budget or quota spent, the total timeout,
 *   failures until the end), with the last exception as its cause or the last value as
 *   [UpstreamUnavailableException.lastResult];
 * * the caller's cancellation, propagated (a `withTimeout` around the call is a deadline: an
 *   attempt it cuts is recorded as a timeout).
 *
 * With the OpenTelemetry API on the classpath, each wait and the give-up are events on the
 * current span, if it is recording (`holdoff.retry`, `holdoff.give_up`: README, "Metrics"); a
 * call that succeeds first time adds none.
 *
 * @param attemptTimeout longest one attempt may take; null (default): no limit of its own.
 * @param totalTimeout longest the whole call may take, waits included (default 60 s,
 *   [DEFAULT_TOTAL_TIMEOUT]); null: no limit, only the budget bounds it. A wait that would not
 *   end before it gives up now, with reason `TOTAL_TIMEOUT`. A limit that is zero, negative or
 *   infinite is refused with [InvalidConfigException] naming `execute.attempt_timeout`
 *   or `execute.total_timeout`.
 * @param classify what an exception thrown by an attempt is ([defaultOutcomeOf] by default).
 * @param classifyResult what a returned value is (default [Outcome.Success]).
 * @param beforeWait called before each wait with its [WaitPlan] (attempts so far, delay, source,
 *   capped, the server's delay).
 * @param afterAttempt called after each attempt with its [AttemptPlan] (number, probe) and the
 *   outcome it was recorded as.
 * @param sleep how the helper waits, both between attempts and for an attempt's time limit
 *   (default [delay]); a test can pass one that moves a [ManualClock].
 */
suspend fun <T> Policy.execute(
    attemptTimeout: Duration? = null,
    totalTimeout: Duration? = DEFAULT_TOTAL_TIMEOUT,
    classify: (Throwable) -> Outcome? = ::defaultOutcomeOf,
    classifyResult: (T) -> Outcome = { Outcome.Success },
    beforeWait: (WaitPlan) -> Unit = {},
    afterAttempt: (AttemptPlan, Outcome) -> Unit = { _, _ -> },
    sleep: suspend (Duration) -> Unit = ::delay,
    block: suspend () -> T,
): T = loop(
    ExecutionConfig(attemptTimeout, totalTimeout), classify, beforeWait, afterAttempt, sleep, block,
) { value -> complete(Attempted.Returned(classifyResult(value))) }

/**
 * [execute] for HTTP calls: each response is classified by the policy's classifier from its
 * [status] and [headers] (Retry-After and the other delay headers read at the decision's one
 * clock reading). A final answer (a 404) is returned; failures until the end (500s) throw
 * [GiveUpException] with the last response as [UpstreamUnavailableException.lastResult]. A
 * [status] that is not an HTTP status (negative, above 999) throws
 * [InvalidInputException] naming `status`. Exceptions are classified by [classify].
 * The other parameters are [execute]'s.
 */
suspend fun <T> Policy.executeHttp(
    status: (T) -> Int,
    headers: (T) -> List<Header> = { emptyList() },
    attemptTimeout: Duration? = null,
    totalTimeout: Duration? = DEFAULT_TOTAL_TIMEOUT,
    classify: (Throwable) -> Outcome? = ::defaultOutcomeOf,
    beforeWait: (WaitPlan) -> Unit = {},
    afterAttempt: (AttemptPlan, Outcome) -> Unit = { _, _ -> },
    sleep: suspend (Duration) -> Unit = ::delay,
    block: suspend () -> T,
): T = loop(
    ExecutionConfig(attemptTimeout, totalTimeout), classify, beforeWait, afterAttempt, sleep, block,
) { response -> completeResponse(status(response), headers(response)) }

/** How one attempt ended. */
private sealed interface Ran<out T> {
    class Returned<T>(val value: T) : Ran<T>

    /** [timedOut]: the attempt's own time limit cancelled it. */
    class Threw(val error: Throwable, val timedOut: Boolean) : Ran<Nothing>
}

/** The one retry loop: every helper is this function with its own way to report a value. */
private suspend fun <T> Policy.loop(
    limits: ExecutionConfig,
    classify: (Throwable) -> Outcome?,
    beforeWait: (WaitPlan) -> Unit,
    afterAttempt: (AttemptPlan, Outcome) -> Unit,
    sleep: suspend (Duration) -> Unit,
    block: suspend () -> T,
    completeValue: Execution.(T) -> Step,
): T = Execution(this, limits).use { exec ->
    // Closing the execution while an attempt is in progress (a classifier or status function
    // that threw) records the attempt as cancelled: a probe is never held.
    var last: Ran<T>? = null
    var step = exec.nextStep()
    while (true) {
        step = when (val s = step) {
            is Step.Attempt -> {
                val ran = attempt(s.plan.timeLimit, sleep, block)
                last = ran
                val next = when (ran) {
                    is Ran.Returned -> exec.completeValue(ran.value)
                    is Ran.Threw -> exec.complete(
                        if (ran.timedOut) Attempted.Raised(Outcome.Timeout)
                        else attemptedOf(ran.error, classify, currentCoroutineContext().isActive),
                    )
                }
                afterAttempt(s.plan, exec.lastOutcome() ?: Outcome.Cancelled)
                next
            }
            is Step.Wait -> {
                try {
                    currentCoroutineContext().ensureActive()
                    RetryEvents.waiting(s.plan, exec.lastOutcome())
                    beforeWait(s.plan)
                    sleep(s.plan.delay)
                } catch (e: CancellationException) {
                    exec.cancel()
                    throw e
                }
                exec.nextStep()
            }
            is Step.Finish -> {
                // A cancelled caller gets its cancellation, whatever the verdict.
                currentCoroutineContext().ensureActive()
                RetryEvents.finished(s.verdict)
                return surface(s.verdict, last)
            }
        }
    }
    @Suppress("UNREACHABLE_CODE")
    throw IllegalStateException("unreachable")
}

/** Where the attempt's exception is kept: the job's own outcome may be its cancellation. */
private class Seen {
    @Volatile var error: Throwable? = null

    @Volatile var timedOut = false
}

/**
 * Runs [block] once in its own child job, bounded by [limit] with [sleep] as the timer: when the
 * timer wins, the attempt's job (not the caller's) is cancelled with [AttemptTimeoutException].
 */
private suspend fun <T> attempt(limit: Duration?, sleep: suspend (Duration) -> Unit, block: suspend () -> T): Ran<T> {
    val seen = Seen()
    return try {
        Ran.Returned(
            coroutineScope {
                // Started at once, so that an attempt that finishes without suspending never
                // starts the timer (and a test's sleeper never moves its clock for it).
                val op = async(start = CoroutineStart.UNDISPATCHED) {
                    try {
                        block()
                    } catch (e: Throwable) {
                        seen.error = e
                        throw e
                    }
                }
                if (limit != null && !op.isCompleted) {
                    launch(start = CoroutineStart.UNDISPATCHED) {
                        sleep(limit)
                        seen.timedOut = true
                        op.cancel(AttemptTimeoutException(limit))
                    }
                }
                val value = op.await()
                coroutineContext.cancelChildren()
                value
            },
        )
    } catch (e: Throwable) {
        Ran.Threw(seen.error ?: e, seen.timedOut)
    }
}

/** The verdict as the caller sees it (the contract's surface table). */
private fun <T> surface(verdict: Verdict, last: Ran<T>?): T {
    val error = (last as? Ran.Threw)?.error
    val value: Any? = if (last is Ran.Returned) last.value else null
    when (verdict) {
        is Verdict.Return -> if (last is Ran.Returned) return last.value else mismatch(verdict)
        is Verdict.Rethrow -> throw error ?: mismatch(verdict)
        is Verdict.BreakerOpen -> throw BreakerOpenException(verdict.attempts, verdict.retryAfter, value, error)
        is Verdict.GiveUp -> throw GiveUpException(verdict.gaveUp, value, error)
        is Verdict.Cancelled -> throw error as? CancellationException
            ?: CancellationException("the call was cancelled: its last attempt was classified as cancelled").apply { initCause(error) }
        is Verdict.InvalidInput -> throw InvalidInputException(verdict.field, verdict.rule)
    }
}

private fun mismatch(verdict: Verdict): Nothing =
    throw IllegalStateException("the verdict ${verdict.stableName()} does not match the last attempt")
