package dev.holdoff

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.test.TestScope
import kotlinx.coroutines.test.currentTime
import kotlinx.coroutines.test.runCurrent
import kotlinx.coroutines.test.runTest
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.IOException
import java.time.Instant
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.time.Duration
import kotlin.time.Duration.Companion.days
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.minutes
import kotlin.time.Duration.Companion.nanoseconds
import kotlin.time.Duration.Companion.seconds

/** The idiomatic layer and the typed errors; time moves only through the manual clock. */
class ApiTest {
    private val trip1 = BreakerConfig(trip = TripPolicy.Consecutive(1))

    // The manual clock follows the test scheduler's virtual time, so that delays taken by
    // execute (virtual under runTest) are seen by the breaker and the budget.
    private fun TestScope.sync(clock: ManualClock) = clock.set(currentTime.milliseconds)

    private fun TestScope.sleeper(clock: ManualClock): suspend (Duration) -> Unit = { d ->
        delay(d)
        sync(clock)
    }

    private fun policy(clock: ManualClock, breaker: BreakerConfig = BreakerConfig(), budget: BudgetConfig = BudgetConfig()) =
        Policy(Breaker(breaker, clock), RetryBudget(budget, clock), null, Classifier(null, clock))

    private inline fun <reified E : HoldoffException> refused(block: () -> Unit): E = assertThrows<E> { block() }

    // --- execute -------------------------------------------------------------------------

    @Test
    fun `execute retries transient failures on the budget's backoff, in virtual time`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        var attempts = 0
        val result = p.execute {
            sync(clock)
            attempts++
            if (attempts < 3) throw IOException("connection reset")
            "ok"
        }
        assertEquals("ok", result)
        assertEquals(3, attempts)
        assertEquals(1500L, currentTime) // 500 ms, then 1 s: the default backoff
    }

    @Test
    fun `execute gives up with the original exception when retries are exhausted`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 2))
        var attempts = 0
        val e = assertThrows<IOException> {
            p.execute {
                sync(clock)
                attempts++
                throw IOException("down #$attempts")
            }
        }
        assertEquals("down #3", e.message)
        assertEquals(3, attempts)
    }

    @Test
    fun `executeHttp honours Retry-After as given`() = runTest {
        val clock = ManualClock()
        val p = policy(clock)
        val responses = ArrayDeque(listOf(429 to "7", 200 to ""))
        val (status, _) = p.executeHttp(
            status = { it.first },
            headers = { headersOf("Retry-After" to it.second) },
            sleep = sleeper(clock),
        ) {
            sync(clock)
            responses.removeFirst()
        }
        assertEquals(200, status)
        assertEquals(7000L, currentTime) // the breaker opened for the same 7 s, then admitted a probe
        assertEquals(State.HALF_OPEN, p.breaker().snapshot().state)
    }

    @Test
    fun `a result classified as failure is returned when the policy gives up`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, budget = BudgetConfig(maxRetries = 1))
        var attempts = 0
        val r = p.execute(classifyResult = { code: Int -> if (code >= 500) Outcome.Failure else Outcome.Success }) {
            sync(clock)
            attempts++
            503
        }
        assertEquals(503, r)
        assertEquals(2, attempts)
    }

    @Test
    fun `coroutine cancellation is recorded as cancelled and frees the probe`() = runTest {
        val clock = ManualClock()
        val breaker = Breaker(trip1, clock)
        breaker.acquire().record(Outcome.Failure) // opens: next probe in 30 s
        clock.set(30.seconds)
        val job = launch { breaker.execute { awaitCancellation() } }
        runCurrent()
        assertEquals(1L, breaker.snapshot().probesInFlight)
        job.cancel()
        job.join()
        val s = breaker.snapshot()
        assertEquals(0L, s.probesInFlight)
        assertEquals(30.seconds, s.interval) // a failed probe would have doubled it
        assertEquals(0L, s.recoveries)
        assertTrue(s.probeReady) // a cancelled probe gives its window back
    }

    @Test
    fun `a policy call cancelled mid-attempt records cancelled, not a failure`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        val call = async { p.execute { awaitCancellation() } }
        runCurrent()
        call.cancel()
        assertThrows<CancellationException> { call.await() }
        val s = p.breaker().snapshot()
        assertEquals(State.CLOSED, s.state)
        assertEquals(0L, s.failures)
    }

    @Test
    fun `a timeout inside the attempt is recorded as a timeout (a failure)`() = runTest {
        val breaker = Breaker(trip1, ManualClock())
        assertThrows<TimeoutCancellationException> {
            breaker.execute { withTimeout(10) { delay(100) } }
        }
        assertEquals(State.OPEN, breaker.snapshot().state)
    }

    @Test
    fun `a refusal is BreakerOpen with the time to the next probe, and the block does not run`() = runTest {
        val clock = ManualClock()
        val breaker = Breaker(trip1, clock)
        breaker.acquire().record(Outcome.Failure)
        clock.set(10.seconds)
        var ran = false
        val e = assertThrows<HoldoffException.BreakerOpen> { breaker.execute { ran = true } }
        assertFalse(ran)
        assertEquals(20.seconds, e.retryAfter)
        assertEquals("breaker_open", e.code())
        breaker.forceOpen()
        assertNull(assertThrows<HoldoffException.BreakerOpen> { breaker.acquire() }.retryAfter)
    }

    @Test
    fun `a first attempt does not wait for an open breaker`() = runTest {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        p.breaker().acquire().record(Outcome.Failure)
        val e = assertThrows<HoldoffException.BreakerOpen> { p.execute { "never" } }
        assertEquals(30.seconds, e.retryAfter)
    }

    @Test
    fun `executeBlocking runs on the calling thread`() {
        val p = policy(ManualClock())
        assertEquals(42, p.executeBlocking { 42 })
    }

    // --- typed errors for bad input ---------------------------------------------------------

    private fun assertConfig(field: String, block: () -> Unit) {
        val e = refused<HoldoffException.InvalidConfig>(block)
        assertEquals(field, e.field)
        assertEquals("invalid_config", e.code())
    }

    @Test
    fun `negative, infinite and too large durations are refused naming the field`() {
        assertConfig("breaker.open_interval.initial") { Breaker(BreakerConfig(openInterval = BackoffConfig(initial = (-1).seconds))) }
        assertConfig("breaker.open_interval.initial") { Breaker(BreakerConfig(openInterval = BackoffConfig(initial = Duration.INFINITE))) }
        assertConfig("budget.retry_after_cap") { RetryBudget(BudgetConfig(retryAfterCap = (-1).nanoseconds)) }
        assertConfig("budget.max_rate_limit_duration") { RetryBudget(BudgetConfig(maxRateLimitDuration = (1L shl 53).milliseconds)) }
        assertConfig("breaker.probe_timeout") { Breaker(BreakerConfig(probeTimeout = -Duration.INFINITE)) }
        assertConfig("classifier.rate_limit_default_wait") { Classifier(ClassifierConfig(rateLimitDefaultWait = (-5).milliseconds), null) }
        // Kotlin's Duration cannot be NaN; numbers from files go through the core's check.
        assertConfig("retry_after_ms") { durationFromMillis("retry_after_ms", Double.NaN) }
        assertEquals(1.5.milliseconds, durationFromMillis("x", 1.5))
    }

    @Test
    fun `NaN and out-of-range rates and counts are refused naming the field`() {
        assertConfig("breaker.open_interval.multiplier") { Breaker(BreakerConfig(openInterval = BackoffConfig(multiplier = Double.NaN))) }
        assertConfig("breaker.open_interval.multiplier") { Breaker(BreakerConfig(openInterval = BackoffConfig(multiplier = 0.5))) }
        assertConfig("budget.backoff.jitter") { RetryBudget(BudgetConfig(backoff = BackoffConfig(jitter = 1.0))) }
        assertConfig("breaker.trip.threshold") { Breaker(BreakerConfig(trip = TripPolicy.Rate(Double.POSITIVE_INFINITY, 10, 10.seconds))) }
        assertConfig("breaker.trip.threshold") { Breaker(BreakerConfig(trip = TripPolicy.Consecutive(-1))) }
        assertConfig("breaker.recoveries") { Breaker(BreakerConfig(recoveries = 0)) }
        assertConfig("quota.capacity") { RetryQuota(QuotaConfig(capacity = -1)) }
        assertConfig("classifier.failure_statuses") { Classifier(ClassifierConfig(failureStatuses = listOf(700)), null) }
    }

    @Test
    fun `operation arguments out of range are InvalidInput`() {
        val clock = ManualClock()
        val e = refused<HoldoffException.InvalidInput> { clock.set((-1).milliseconds) }
        assertEquals("at", e.field)
        assertEquals("invalid_input", e.code())
        assertEquals("status", refused<HoldoffException.InvalidInput> { Classifier(null, clock).classify(99) }.field)
        assertEquals("status", refused<HoldoffException.InvalidInput> { Classifier(null, clock).classify(70000) }.field)
        val breaker = Breaker(BreakerConfig(), clock)
        val permit = breaker.acquire()
        val bad = refused<HoldoffException.InvalidInput> { permit.record(Outcome.RetryLater((-5).seconds)) }
        assertEquals("outcome.retry_later", bad.field)
        assertFalse(permit.isRecorded()) // a refused argument does not spend the permit
    }

    @Test
    fun `the clock refuses to go backwards`() {
        val clock = ManualClock()
        clock.set(10.seconds)
        val e = refused<HoldoffException.ClockBackwards> { clock.set(9.seconds) }
        assertEquals("clock_backwards", e.code())
        assertEquals(10.seconds, e.now)
        assertEquals(10.seconds, clock.now())
    }

    @Test
    fun `permits are recorded once, on the breaker that issued them`() {
        val clock = ManualClock()
        val a = Breaker(BreakerConfig(), clock)
        val b = Breaker(BreakerConfig(), clock)
        val permit = a.acquire()
        assertEquals("foreign_permit", refused<HoldoffException.ForeignPermit> { b.record(permit, Outcome.Success) }.code())
        assertEquals(Effect.COUNTED, a.record(permit, Outcome.Success))
        assertTrue(permit.isRecorded())
        assertEquals("permit_already_recorded", refused<HoldoffException.PermitAlreadyRecorded> { permit.recordSuccess() }.code())
    }

    // --- the rest of the surface ----------------------------------------------------------

    @Test
    fun `durations cross exactly, however large`() {
        val clock = ManualClock()
        val t = 36525.days + 1.nanoseconds // a century and a nanosecond
        clock.set(t)
        assertEquals(t, clock.now())
        val b = Breaker(BreakerConfig(openInterval = BackoffConfig(initial = 1.days + 1.nanoseconds)), clock)
        b.acquire().record(Outcome.RetryLater(3.nanoseconds)) // opens for the guard-bounded delay
        val change = b.drainEvents().single()
        assertEquals(t, change.at)
        assertEquals(3.nanoseconds, change.requestedDelay)
    }

    @Test
    fun `the closed fast path reads no clock`() {
        val clock = ManualClock()
        val b = Breaker(BreakerConfig(), clock)
        repeat(100) { b.acquire().recordSuccess() }
        assertEquals(0L, clock.reads())
    }

    @Test
    fun `admission, recovery ramp and events`() {
        val clock = ManualClock()
        val b = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(2), recoveries = 2), clock)
        repeat(2) { (b.allow() as Admission.Admitted).permit.record(Outcome.Failure) }
        val refused = b.allow() as Admission.Refused
        assertEquals(30.seconds, refused.retryAfter)
        assertEquals(State.OPEN, refused.state)
        clock.set(30.seconds)
        val probe = b.allow() as Admission.Admitted
        assertTrue(probe.probe)
        assertEquals(1L, probe.episode)
        assertTrue(b.allow() is Admission.Refused) // one probe per interval
        probe.permit.record(Outcome.Success)
        assertEquals(State.HALF_OPEN, b.snapshot().state) // one answer does not close
        clock.set(60.seconds)
        (b.allow() as Admission.Admitted).permit.record(Outcome.Answer)
        assertEquals(State.CLOSED, b.snapshot().state)
        val reasons = b.drainEvents().map { it.reason }
        assertEquals(listOf(Reason.TRIPPED, Reason.PROBE_ADMITTED, Reason.RECOVERED), reasons)
        assertTrue(b.drainEvents().isEmpty())
    }

    @Test
    fun `a listener hears state changes`() {
        val clock = ManualClock()
        val b = Breaker(trip1, clock)
        val heard = mutableListOf<StateChange>()
        b.setListener(object : StateListener {
            override fun onStateChange(change: StateChange) {
                heard += change
            }
        })
        b.acquire().record(Outcome.Failure)
        b.reset()
        assertEquals(listOf(Reason.TRIPPED, Reason.RESET), heard.map { it.reason })
        assertEquals(State.OPEN, heard[0].to)
        assertEquals(30.seconds, heard[0].openFor)
    }

    @Test
    fun `groups keep one breaker per key`() {
        val group = BreakerGroup(trip1, ManualClock())
        group.get("b.example").acquire().record(Outcome.Failure)
        assertEquals(State.OPEN, group.get("b.example").snapshot().state)
        assertEquals(State.CLOSED, group.get("a.example").snapshot().state)
        assertEquals(listOf("a.example", "b.example"), group.keys())
        assertNull(group.peek("c.example"))
        assertEquals(2L, group.size())
    }

    @Test
    fun `budget, quota and policy compose on one clock`() {
        val clock = ManualClock()
        val budget = RetryBudget(BudgetConfig(), clock)
        val call = RetryState()
        val d = budget.decide(call, Outcome.RetryLater(10.minutes)) as Decision.Retry
        assertEquals(5.minutes, d.delay) // capped, and says so
        assertTrue(d.capped)
        assertEquals(WaitSource.RETRY_AFTER, d.source)
        assertEquals(Duration.ZERO, budget.episodeStart())

        val quota = RetryQuota(QuotaConfig(capacity = 10, retryCost = 5))
        val lease = (quota.acquire(false) as QuotaAcquisition.Acquired).lease
        assertEquals(5L, quota.available())
        quota.onSuccess(lease)
        assertEquals(10L, quota.available())
        assertEquals("lease.cost", refused<HoldoffException.InvalidInput> { quota.onSuccess(QuotaLease(-1)) }.field)

        val other = ManualClock()
        val e = refused<HoldoffException.InvalidConfig> { Policy(Breaker(BreakerConfig(), clock), RetryBudget(BudgetConfig(), other), quota, null) }
        assertEquals("policy.clock", e.field)
        // Without a manual clock, everything shares the process's monotonic clock.
        val p = Policy(Breaker(BreakerConfig()), RetryBudget(BudgetConfig()))
        assertSame(null, p.quota())
    }

    @Test
    fun `Retry-After parsing and classification`() {
        val origin = Instant.parse("2026-01-01T00:00:00Z")
        val clock = ManualClock.withWallOrigin(origin)
        assertEquals(120.seconds, parseRetryAfter(" 120 ", origin).delayOrNull)
        assertEquals(90.seconds, parseRetryAfter("Thu, 01 Jan 2026 00:01:30 GMT", origin).delayOrNull)
        assertEquals(RetryAfter.Unusable(Unusable.SIGNED), parseRetryAfter("-5", origin))
        assertEquals(Unusable.CONFLICTING, (hintFromHeaders(headersOf("Retry-After" to "1", "retry-after" to "2"), origin).hint as RetryAfter.Unusable).reason)
        val c = Classifier(ClassifierConfig(failureStatuses = listOf(403)), clock)
        assertEquals(Outcome.RetryLater(3.seconds), c.classify(503, "Retry-After" to "3").outcome)
        assertEquals(Outcome.Failure, c.classify(403).outcome)
        assertEquals(Outcome.Answer, c.classify(404).outcome)
        assertEquals(HintSource.RATELIMIT_RESET, c.classify(429, "RateLimit-Reset" to "5").source)
        assertEquals("retry_later", c.classify(429, "RateLimit-Reset" to "5").outcome.stableName)
    }

    @Test
    fun `backoff schedules come from the core's seeded PRNG`() {
        val b = BackoffConfig(initial = 1.seconds, multiplier = 2.0, max = 5.seconds)
        assertEquals(listOf(1.seconds, 2.seconds, 4.seconds, 5.seconds), backoffIntervals(b, 4u, 0))
        val jittered = b.copy(jitter = 0.5)
        assertEquals(backoffIntervals(jittered, 8u, 7), backoffIntervals(jittered, 8u, 7))
        assertTrue(backoffIntervals(jittered, 8u, 7).all { it >= 500.milliseconds && it <= 5.seconds })
    }

    @Test
    fun `objects are safe to share between threads`() {
        val b = Breaker(BreakerConfig(), ManualClock())
        val pool = Executors.newFixedThreadPool(4)
        repeat(4) {
            pool.execute { repeat(5_000) { b.acquire().use { p -> p.recordSuccess() } } }
        }
        pool.shutdown()
        assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS))
        assertEquals(State.CLOSED, b.snapshot().state)
        val p = b.acquire()
        p.recordSuccess()
        assertThrows<HoldoffException.PermitAlreadyRecorded> { p.recordSuccess() }
    }
}
