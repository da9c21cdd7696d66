package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.delay
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.test.TestScope
import kotlinx.coroutines.test.advanceTimeBy
import kotlinx.coroutines.test.currentTime
import kotlinx.coroutines.test.runCurrent
import kotlinx.coroutines.test.runTest
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertNotSame
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.IOException
import java.io.InterruptedIOException
import java.net.ConnectException
import java.net.SocketTimeoutException
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * The retry helpers `execute` and `executeHttp`: options, hooks and what the caller gets. Time
 * moves only in the test scheduler's virtual time, which the manual clock follows.
 */
class ExecuteTest {
    private val trip1 = BreakerConfig(trip = TripPolicy.Consecutive(1))

    // The manual clock follows the test scheduler's virtual time, so that the waits and the
    // attempt timers (virtual under runTest) are seen by the breaker and the budget.
    private fun TestScope.sync(clock: ManualClock) = clock.set(currentTime.milliseconds)

    private fun TestScope.sleeper(clock: ManualClock): suspend (Duration) -> Unit = { d ->
        delay(d)
        sync(clock)
    }

    private fun policy(
        clock: ManualClock,
        breaker: BreakerConfig = BreakerConfig(),
        budget: BudgetConfig = BudgetConfig(),
        quota: RetryQuota? = null,
    ) = Policy(Breaker(breaker, clock), RetryBudget(budget, clock), quota, Classifier(null, clock))

    /** A response of the test's own client. */
    private class Resp(val status: Int, vararg val headers: Pair<String, String>)

    private suspend fun Policy.http(
        clock: ManualClock,
        scope: TestScope,
        waits: MutableList<WaitPlan> = mutableListOf(),
        totalTimeout: Duration? = DEFAULT_TOTAL_TIMEOUT,
        responses: () -> Resp,
    ): Resp = executeHttp(
        status = { it.status },
        headers = { headersOf(*it.headers) },
        totalTimeout = totalTimeout,
        beforeWait = { waits += it },
        sleep = scope.sleeper(clock),
    ) { responses() }

    // --- what the caller gets ---------------------------------------------------------------

    @Test
    fun `a final 404 is returned, not thrown, after one attempt`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        val notFound = Resp(404)
        var attempts = 0
        val r = p.http(clock, this) { attempts++; notFound }
        assertSame(notFound, r)
        assertEquals(1, attempts)
        assertEquals(0L, p.breaker().snapshot().failures)
    }

    @Test
    fun `500s until retries run out throw GiveUpException with the last response attached`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 2))
        val sent = mutableListOf<Resp>()
        val waits = mutableListOf<WaitPlan>()
        val e = assertThrows<GiveUpException> { p.http(clock, this, waits) { Resp(500).also { sent += it } } }
        assertEquals(3, sent.size)
        assertSame(sent.last(), e.lastResult)
        assertNull(e.cause)
        assertEquals(GiveUpReason.ATTEMPTS_EXHAUSTED, e.reason)
        assertEquals(3L, e.attempts)
        assertNull(e.retryAfter)
        assertNull(e.serverDelay)
        assertFalse(e.capped)
        assertInstanceOf(UpstreamUnavailableException::class.java, e)
        assertEquals(listOf(500.milliseconds, 1.seconds), waits.map { it.delay })
        assertEquals(1500L, currentTime)
    }

    @Test
    fun `transport errors until retries run out throw GiveUpException with the last error as its cause`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 2))
        val thrown = mutableListOf<IOException>()
        val e = assertThrows<GiveUpException> {
            p.execute(sleep = sleeper(clock)) { throw IOException("down #${thrown.size + 1}").also { thrown += it } }
        }
        assertEquals(3, thrown.size)
        assertSame(thrown.last(), e.cause)
        assertNull(e.lastResult)
        assertEquals(GiveUpReason.ATTEMPTS_EXHAUSTED, e.reason)
    }

    @Test
    fun `a value classified as a failure until the end is attached to the give-up`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 1))
        var attempts = 0
        val e = assertThrows<GiveUpException> {
            p.execute(classifyResult = { code: Int -> if (code >= 500) Outcome.Failure else Outcome.Success }, sleep = sleeper(clock)) {
                attempts++
                503
            }
        }
        assertEquals(503, e.lastResult)
        assertEquals(2, attempts)
    }

    @Test
    fun `a programming error is re-thrown at once, unretried, and moves nothing`() = runTest {
        val clock = ManualClock()
        val quota = RetryQuota(QuotaConfig(capacity = 500))
        val p = policy(clock, breaker = trip1, quota = quota)
        val bug = IllegalStateException("a bug in the caller")
        val seen = mutableListOf<Pair<Long, Outcome>>()
        var attempts = 0
        val e = assertThrows<IllegalStateException> {
            p.execute(afterAttempt = { plan, o -> seen += plan.number to o }, sleep = sleeper(clock)) {
                attempts++
                throw bug
            }
        }
        assertSame(bug, e)
        assertEquals(1, attempts)
        assertEquals(listOf(1L to Outcome.Cancelled), seen)
        val s = p.breaker().snapshot()
        assertEquals(State.CLOSED, s.state)
        assertEquals(0L, s.failures)
        assertEquals(0L, s.staleAnswers)
        assertNull(p.budget().episodeStart())
        assertEquals(500L, quota.available())
        assertEquals(0L, currentTime)
    }

    @Test
    fun `an exception classified as an answer is re-thrown unchanged after one attempt`() = runTest {
        class NotFound : Exception()
        val clock = ManualClock()
        val p = policy(clock)
        val answer = NotFound()
        var attempts = 0
        val e = assertThrows<NotFound> {
            p.execute(classify = { if (it is NotFound) Outcome.Answer else defaultOutcomeOf(it) }, sleep = sleeper(clock)) {
                attempts++
                throw answer
            }
        }
        assertSame(answer, e)
        assertEquals(1, attempts)
        assertEquals(0L, p.breaker().snapshot().failures)
    }

    @Test
    fun `a classifier overrides the default table`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        var attempts = 0
        // IllegalStateException is a programming error by default; this caller's client uses it
        // for a transient failure.
        val r = p.execute(
            classify = { if (it is IllegalStateException) Outcome.Failure else defaultOutcomeOf(it) },
            sleep = sleeper(clock),
        ) {
            if (++attempts < 3) throw IllegalStateException("pool exhausted")
            "ok"
        }
        assertEquals("ok", r)
        assertEquals(3, attempts)
    }

    @Test
    fun `a first attempt does not wait for an open breaker`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        p.breaker().acquire().record(Outcome.Failure)
        var ran = false
        val e = assertThrows<BreakerOpenException> { p.execute { ran = true } }
        assertFalse(ran)
        assertEquals(30.seconds, e.retryAfter)
        assertEquals(0L, e.attempts)
        assertEquals(GiveUpReason.BREAKER_OPEN, e.reason)
        assertNull(e.cause)
        assertInstanceOf(UpstreamUnavailableException::class.java, e)
    }

    @Test
    fun `a value that is not a status is InvalidInput naming status, and the attempt moves nothing`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        val e = assertThrows<InvalidInputException> { p.http(clock, this) { Resp(1000) } }
        assertEquals("status", e.field)
        assertEquals("invalid_input", e.code())
        assertEquals(0L, p.breaker().snapshot().failures)
    }

    // --- timeouts ---------------------------------------------------------------------------

    @Test
    fun `an attempt timeout is a timeout, and cancels the attempt's own job, not the caller`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 1))
        val caller = currentCoroutineContext()[Job]
        val jobs = mutableListOf<Job?>()
        val errors = mutableListOf<Throwable>()
        val outcomes = mutableListOf<Outcome>()
        val e = assertThrows<GiveUpException> {
            p.execute(attemptTimeout = 100.milliseconds, afterAttempt = { _, o -> outcomes += o }, sleep = sleeper(clock)) {
                jobs += currentCoroutineContext()[Job]
                try {
                    awaitCancellation()
                } catch (t: Throwable) {
                    errors += t
                    throw t
                }
            }
        }
        assertEquals(listOf(Outcome.Timeout, Outcome.Timeout), outcomes)
        assertEquals(GiveUpReason.ATTEMPTS_EXHAUSTED, e.reason)
        assertSame(errors.last(), e.cause)
        assertEquals(100.milliseconds, (e.cause as AttemptTimeoutException).limit)
        assertEquals(2L, p.breaker().snapshot().failures) // a timeout is a failure
        assertEquals(700L, currentTime) // 100 ms, the 500 ms backoff, 100 ms
        // Each attempt had its own job, a child of none but the helper's: the caller lives on.
        assertNotSame(jobs[0], jobs[1])
        assertTrue(jobs.none { it === caller })
        assertTrue(currentCoroutineContext().isActive)
    }

    @Test
    fun `an attempt that finishes within its limit is not cut`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        val r = p.execute(attemptTimeout = 100.milliseconds, sleep = sleeper(clock)) {
            delay(99)
            "in time"
        }
        assertEquals("in time", r)
        assertEquals(99L, currentTime)
    }

    @Test
    fun `a caller withTimeout is a deadline, and the attempt it cuts is recorded as a timeout`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        val outcomes = mutableListOf<Outcome>()
        val waits = mutableListOf<WaitPlan>()
        assertThrows<TimeoutCancellationException> {
            withTimeout(100) {
                p.execute(afterAttempt = { _, o -> outcomes += o }, beforeWait = { waits += it }, sleep = sleeper(clock)) {
                    sync(clock)
                    awaitCancellation()
                }
            }
        }
        assertEquals(listOf(Outcome.Timeout), outcomes)
        assertEquals(emptyList<WaitPlan>(), waits) // the caller is gone: no wait announced
        assertEquals(State.OPEN, p.breaker().snapshot().state)
    }

    @Test
    fun `the total timeout bounds the waits, and null is no limit`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        // A server that asks for two minutes: the default 60 s total timeout gives up now.
        val e = assertThrows<GiveUpException> { p.http(clock, this) { Resp(503, "Retry-After" to "120") } }
        assertEquals(GiveUpReason.TOTAL_TIMEOUT, e.reason)
        assertEquals(120.seconds, e.serverDelay)
        assertEquals(120.seconds, e.retryAfter) // the breaker opened for the server's delay
        assertEquals(0L, currentTime)

        // With no total timeout the call waits the two minutes, never shortened.
        val answers = ArrayDeque(listOf(Resp(503, "Retry-After" to "120"), Resp(200)))
        val waits = mutableListOf<WaitPlan>()
        val fresh = ManualClock()
        val r = policy(fresh).http(fresh, this, waits, totalTimeout = null) { answers.removeFirst() }
        assertEquals(200, r.status)
        assertEquals(listOf(120.seconds), waits.map { it.delay })
        assertEquals(WaitSource.RETRY_AFTER, waits.single().source)
        assertEquals(120.seconds, waits.single().serverDelay)
        assertEquals(120_000L, currentTime)
    }

    @Test
    fun `limits that are zero, negative or infinite are refused naming the field`() = runTest {
        val p = policy(ManualClock())
        var ran = false
        for ((field, attempt, total) in listOf(
            Triple("execute.attempt_timeout", Duration.ZERO, DEFAULT_TOTAL_TIMEOUT),
            Triple("execute.attempt_timeout", Duration.INFINITE, DEFAULT_TOTAL_TIMEOUT),
            Triple("execute.total_timeout", null, (-1).seconds),
            Triple("execute.total_timeout", null, Duration.ZERO),
        )) {
            val e = assertThrows<InvalidConfigException> {
                p.execute(attemptTimeout = attempt, totalTimeout = total) { ran = true }
            }
            assertEquals(field, e.field, "$attempt / $total")
            assertEquals("invalid_config", e.code())
        }
        assertFalse(ran)
        assertEquals(60.seconds, DEFAULT_TOTAL_TIMEOUT)
    }

    // --- hooks, retry-later, cancellation -----------------------------------------------------

    @Test
    fun `the hooks see every attempt and every wait`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        val attempts = mutableListOf<Triple<Long, Boolean, Outcome>>()
        val waits = mutableListOf<WaitPlan>()
        var n = 0
        p.execute(
            beforeWait = { waits += it },
            afterAttempt = { plan, o -> attempts += Triple(plan.number, plan.probe, o) },
            sleep = sleeper(clock),
        ) {
            when (++n) {
                1 -> throw ConnectException("refused")
                2 -> throw SocketTimeoutException("read timed out")
                else -> "ok"
            }
        }
        assertEquals(
            listOf(Triple(1L, false, Outcome.Failure), Triple(2L, false, Outcome.Timeout), Triple(3L, false, Outcome.Success)),
            attempts,
        )
        assertEquals(
            listOf(
                WaitPlan(attempts = 1, delay = 500.milliseconds, source = WaitSource.BACKOFF, capped = false, serverDelay = null),
                WaitPlan(attempts = 2, delay = 1.seconds, source = WaitSource.BACKOFF, capped = false, serverDelay = null),
            ),
            waits,
        )
    }

    @Test
    fun `RetryLaterException is honoured as given, and opens the breaker for that long`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        var n = 0
        val waits = mutableListOf<WaitPlan>()
        val r = p.execute(beforeWait = { waits += it }, sleep = sleeper(clock)) {
            if (++n == 1) throw RetryLaterException(7.seconds)
            "ok"
        }
        assertEquals("ok", r)
        assertEquals(7000L, currentTime)
        assertEquals(WaitSource.RETRY_AFTER, waits.single().source)
        assertEquals(State.HALF_OPEN, p.breaker().snapshot().state) // the call was the first probe
        // A negative delay is the caller's error, named; the attempt is recorded as cancelled.
        val fresh = policy(clock, breaker = trip1)
        val bad = assertThrows<InvalidInputException> { fresh.execute { throw RetryLaterException((-1).seconds) } }
        assertEquals("outcome.retry_later", bad.field)
        assertEquals(State.CLOSED, fresh.breaker().snapshot().state)
        assertEquals(0L, fresh.breaker().snapshot().failures)
    }

    @Test
    fun `the caller's cancellation during an attempt is recorded as cancelled, not a failure`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        val outcomes = mutableListOf<Outcome>()
        val call = async { p.execute(afterAttempt = { _, o -> outcomes += o }) { awaitCancellation() } }
        runCurrent()
        call.cancel()
        assertThrows<CancellationException> { call.await() }
        assertEquals(listOf(Outcome.Cancelled), outcomes)
        val s = p.breaker().snapshot()
        assertEquals(State.CLOSED, s.state)
        assertEquals(0L, s.failures)
    }

    @Test
    fun `the caller's cancellation during a wait ends the call at once`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        var attempts = 0
        val call = async { p.execute(sleep = sleeper(clock)) { attempts++; throw IOException("down") } }
        runCurrent()
        advanceTimeBy(200)
        call.cancel()
        assertThrows<CancellationException> { call.await() }
        advanceTimeBy(10_000)
        assertEquals(1, attempts)
        assertEquals(1L, p.breaker().snapshot().failures)
    }

    @Test
    fun `the default classification follows the contract's table`() = runTest {
        val deadline = runCatching { withTimeout(1) { delay(10) } }.exceptionOrNull()
        assertInstanceOf(TimeoutCancellationException::class.java, deadline)
        val table = listOf(
            IOException("x") to Outcome.Failure,
            ConnectException("refused") to Outcome.Failure,
            SocketTimeoutException("read") to Outcome.Timeout,
            InterruptedIOException("interrupted") to Outcome.Timeout,
            deadline!! to Outcome.Timeout,
            AttemptTimeoutException(1.seconds) to Outcome.Timeout,
            CancellationException("the caller") to Outcome.Cancelled,
            RetryLaterException(3.seconds) to Outcome.RetryLater(3.seconds),
            IllegalStateException("bug") to null,
            NullPointerException() to null,
            IllegalArgumentException("bug") to null,
        )
        for ((error, outcome) in table) assertEquals(outcome, defaultOutcomeOf(error), "$error")
    }

    // --- the deadline storm -----------------------------------------------------------------

    @Test
    fun `a deadline storm against a hanging upstream sends one probe per interval and leaves the breaker open`() = runTest {
        // Threshold 1, a constant 1 s open interval, an upstream that never answers. An earlier
        // failure opened the breaker at 0; then 20 callers, each with a 100 ms attempt timeout,
        // call again and again for 6 s (waiting as told when refused). Each probe times out at
        // +100 ms, a failure that re-opens the breaker for 1 s from then: probes at 1.0, 2.1,
        // 3.2, 4.3 and 5.4 s, and the breaker open, not half-open, at the end. (Were a timeout
        // recorded as a cancellation, the window would re-arm at each admission: a probe every
        // second and a breaker stuck half-open.)
        val clock = ManualClock()
        val p = policy(clock, breaker = BreakerConfig(trip = TripPolicy.Consecutive(1), openInterval = BackoffConfig(initial = 1.seconds, multiplier = 1.0)))
        p.breaker().acquire().record(Outcome.Failure)
        val requests = mutableListOf<Long>()
        val unexpected = mutableListOf<Throwable>()
        val sleep = sleeper(clock)
        val calls = IntArray(20)
        val callers = List(20) { k ->
            launch {
                while (true) {
                    calls[k]++
                    try {
                        p.execute(attemptTimeout = 100.milliseconds, sleep = sleep) {
                            requests += currentTime
                            awaitCancellation()
                        }
                    } catch (e: UpstreamUnavailableException) {
                        sleep((e.retryAfter ?: 100.milliseconds).coerceAtLeast(1.milliseconds))
                    } catch (e: CancellationException) {
                        throw e
                    } catch (e: Throwable) {
                        unexpected += e
                        return@launch
                    }
                }
            }
        }
        advanceTimeBy(6001)
        callers.forEach { it.cancel() }
        runCurrent()
        assertEquals(emptyList<Throwable>(), unexpected)
        assertTrue(requests.size <= 7, "$requests")
        assertEquals(listOf(1000L, 2100L, 3200L, 4300L, 5400L), requests)
        val s = p.breaker().snapshot()
        assertEquals(State.OPEN, s.state)
        assertEquals(0L, s.probesInFlight)
        assertEquals(1L, s.opens)
        assertEquals(5L, s.probes)
        // Every caller kept calling (a call that got a probe waits for the next one inside the
        // call); the breaker refused them, not the upstream.
        assertTrue(calls.all { it >= 2 }, calls.toList().toString())
        assertTrue(s.refusals >= 20 * 5, "${s.refusals}")
    }
}
