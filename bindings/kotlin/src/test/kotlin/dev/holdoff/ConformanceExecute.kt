package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.cancel
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.supervisorScope
import org.json.JSONArray
import org.json.JSONObject
import java.net.ConnectException
import java.net.SocketTimeoutException
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds

// The `execute` op of the conformance runner: one logical call through Kotlin's real retry
// helpers (`execute` or `executeHttp`), with a sleeper that moves the manual clock and hooks that
// record what a user sees (conformance/README.md, "Execute: the retry helpers").

/** A value an attempt of the plain flavour returns; the result classifier reads its outcome. */
private class Value(val outcome: Outcome)

/** A response an attempt of the HTTP flavour returns (the helper takes any type). */
private class Response(val status: Int, val headers: List<Header>)

/** The runner's own error type, which the runner's classifier calls a final answer. */
private class RunnerAnswer : Exception("a final answer, thrown")

/** The runner's classifier: its own error is an answer, the rest is the default table. */
private fun runnerClassify(e: Throwable): Outcome? = if (e is RunnerAnswer) Outcome.Answer else defaultOutcomeOf(e)

/** The exception a `raises` item throws. */
private fun raised(v: Any?): Throwable = when (v) {
    "transport" -> ConnectException("Connection refused")
    "timeout" -> SocketTimeoutException("Read timed out")
    "answer" -> RunnerAnswer()
    "bug" -> IllegalStateException("a programming error in the caller")
    is JSONObject -> {
        v.only("raises", "retry_later_ms")
        RetryLaterException(duration("raises.retry_later", v.get("retry_later_ms")))
    }
    else -> fail("unknown raise $v")
}

/**
 * Runs one `execute` step and returns what the hooks and the caller saw: `attempts`, `waits` and
 * `result`, as the suite spells them.
 *
 * Script items: the operation moves the clock by `takes_ms`, then returns, responds or throws.
 * `hits_deadline` moves nothing itself and waits until the helper's attempt timer (the same
 * sleeper, so the clock moves by the attempt's time limit) cancels it; the runner checks that the
 * limit was `takes_ms`. `cancelled` throws a `CancellationException` out of the attempt: what a
 * helper sees of a caller's cancellation, while the caller's own job stays active so that a
 * cancellation at the attempt's limit can be the timeout it is. `cancel_in_wait` cancels the
 * caller's job for real, in that wait.
 */
internal fun runExecute(
    policy: Policy,
    clock: ManualClock,
    limits: ExecutionConfig,
    flavour: Flavour,
    step: JSONObject,
    headersOf: (JSONObject) -> List<Header>,
): Map<String, Any?> {
    val script = step.items()
    val cancelInWait = if (step.has("cancel_in_wait")) step.getInt("cancel_in_wait") else null
    val starts = mutableListOf<Long>() // the manual clock (ms) when each attempt started
    val produced = mutableListOf<Any?>() // each attempt's exception, value or response
    val attempts = mutableListOf<Map<String, Any?>>()
    val waits = mutableListOf<Map<String, Any?>>()
    var inWait = false

    val operation: suspend () -> Any = {
        val i = starts.size
        if (i >= script.size) fail("attempt ${i + 1} is not in the script")
        val item = script[i]
        item.only("script item", "returns", "response", "raises", "hits_deadline", "cancelled", "takes_ms")
        starts += clock.now().inWholeMilliseconds
        produced += null
        if (item.optBoolean("hits_deadline", false)) {
            try {
                awaitCancellation()
            } catch (e: Throwable) {
                produced[i] = e
                throw e
            }
        }
        clock.advance(item.optLong("takes_ms", 0).milliseconds)
        when {
            item.has("returns") -> {
                if (flavour != Flavour.PLAIN) fail("a returns item in the $flavour flavour")
                Value(outcome(item.get("returns"))).also { produced[i] = it }
            }
            item.has("response") -> {
                if (flavour != Flavour.HTTP) fail("a response item in the $flavour flavour")
                val r = item.getJSONObject("response")
                r.only("response", "status", "headers")
                Response(r.status(), headersOf(r)).also { produced[i] = it }
            }
            item.optBoolean("cancelled", false) -> throw CancellationException("the caller cancelled the call").also { produced[i] = it }
            item.has("raises") -> throw raised(item.get("raises")).also { produced[i] = it }
            else -> fail("a script item returns, responds, raises, hits its deadline or is cancelled: $item")
        }
    }

    val sleeper: suspend (Duration) -> Unit = { d ->
        if (inWait && waits.size == cancelInWait) {
            // The caller's own cancellation, during this wait.
            currentCoroutineContext().cancel()
            awaitCancellation()
        }
        inWait = false
        clock.advance(d)
    }
    val beforeWait: (WaitPlan) -> Unit = { w ->
        waits += mapOf(
            "delay_ms" to ms(w.delay),
            "source" to w.source.stableName(),
            "capped" to w.capped,
            "server_delay_ms" to ms(w.serverDelay),
        )
        inWait = true
    }
    val afterAttempt: (AttemptPlan, Outcome) -> Unit = { plan, outcome ->
        val i = (plan.number - 1).toInt()
        if (i != starts.size - 1) fail("the hook reported attempt ${plan.number} after ${starts.size} attempts")
        val item = script[i]
        if (item.optBoolean("hits_deadline", false)) {
            val took = clock.now().inWholeMilliseconds - starts[i]
            if (took != item.optLong("takes_ms", -1)) fail("attempt ${plan.number} hit its deadline after $took ms, the script says ${item.opt("takes_ms")}")
        }
        attempts += mapOf("at" to starts[i], "probe" to plan.probe, "outcome" to outcome.stableName())
    }

    val allSuccess = script.all { !it.has("returns") || outcome(it.get("returns")) == Outcome.Success }
    val helper: suspend () -> Any = {
        when (flavour) {
            Flavour.PLAIN -> if (allSuccess) {
                policy.execute(
                    limits.attemptTimeout, limits.totalTimeout, classify = ::runnerClassify,
                    beforeWait = beforeWait, afterAttempt = afterAttempt, sleep = sleeper, block = operation,
                )
            } else {
                policy.execute(
                    limits.attemptTimeout, limits.totalTimeout, classify = ::runnerClassify,
                    classifyResult = { (it as Value).outcome },
                    beforeWait = beforeWait, afterAttempt = afterAttempt, sleep = sleeper, block = operation,
                )
            }
            Flavour.HTTP -> policy.executeHttp(
                status = { (it as Response).status },
                headers = { (it as Response).headers },
                attemptTimeout = limits.attemptTimeout,
                totalTimeout = limits.totalTimeout,
                classify = ::runnerClassify,
                beforeWait = beforeWait,
                afterAttempt = afterAttempt,
                sleep = sleeper,
                block = operation,
            )
        }
    }

    val result = runBlocking {
        // The caller is a job of its own, which `cancel_in_wait` cancels. Its outcome is caught
        // inside it: rethrown across coroutines, an exception may arrive as a copy (stack-trace
        // recovery), and the runner compares identities.
        supervisorScope {
            val call = async { runCatching { helper() } }
            fun attemptOf(x: Any): Int? = produced.indexOfFirst { it === x }.takeIf { it >= 0 }?.plus(1)
            try {
                val v = try {
                    call.await()
                } catch (e: CancellationException) {
                    Result.failure(e)
                }.getOrThrow()
                mapOf("returns" to (attemptOf(v) ?: fail("the call returned $v, which no attempt produced")))
            } catch (e: CaseFailure) {
                throw e
            } catch (e: UpstreamUnavailableException) {
                if (e.cause != null && e.lastResult != null) fail("both an exception and a result attached: $e")
                val attached = e.cause ?: e.lastResult
                mapOf(
                    "raises" to when (e) {
                        is BreakerOpenException -> "breaker_open"
                        is GiveUpException -> "give_up"
                    },
                    "reason" to e.reason.stableName(),
                    "attempts" to e.attempts,
                    "retry_after_ms" to ms(e.retryAfter),
                    "server_delay_ms" to ms(e.serverDelay),
                    "capped" to e.capped,
                    "cause" to attached?.let { attemptOf(it) ?: fail("attached $it, which no attempt produced") },
                )
            } catch (e: InvalidInputException) {
                if (e.field != "status") fail("invalid input naming ${e.field}, not status")
                mapOf("raises" to "invalid_input", "attempts" to starts.size)
            } catch (e: CancellationException) {
                mapOf("raises" to "cancelled", "attempts" to starts.size)
            } catch (e: Throwable) {
                mapOf("raises" to "original", "attempt" to (attemptOf(e) ?: throw e))
            }
        }
    }
    return mapOf("attempts" to attempts, "waits" to waits, "result" to result)
}

/** Compares an `execute` step's expectation: `attempts` and `waits` are exact lists. */
internal fun checkExecute(expect: Any?, got: Map<String, Any?>) {
    if (expect == null) return
    val obj = expect as? JSONObject ?: fail("expect must be an object")
    for (k in obj.keySet()) {
        when (k) {
            "attempts", "waits" -> {
                val want = obj.get(k) as? JSONArray ?: fail("$k must be an array")
                @Suppress("UNCHECKED_CAST")
                val have = got[k] as List<Map<String, Any?>>
                if (want.length() != have.size) fail("$k: expected ${want.length()}, got ${have.size}: $have")
                val keys = if (k == "attempts") arrayOf("at", "probe", "outcome") else arrayOf("delay_ms", "source", "capped", "server_delay_ms")
                have.forEachIndexed { i, h ->
                    try {
                        check(want.get(i), h, *keys)
                    } catch (e: CaseFailure) {
                        fail("$k[$i]: ${e.message}")
                    }
                }
            }
            "result" -> try {
                @Suppress("UNCHECKED_CAST")
                check(obj.get(k), got[k] as Map<String, Any?>, "returns", "raises", "reason", "attempts", "attempt", "retry_after_ms", "server_delay_ms", "capped", "cause")
            } catch (e: CaseFailure) {
                fail("result: ${e.message}")
            }
            else -> fail("unknown expect key \"$k\"")
        }
    }
}
