package dev.holdoff

import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
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

    private fun policy(clock: ManualClock, breaker: BreakerConfig = BreakerConfig(), budget: BudgetConfig = BudgetConfig()) =
        Policy(Breaker(breaker, clock), RetryBudget(budget, clock), null, Classifier(null, clock))

    private inline fun <reified E : HoldoffException> refused(block: () -> Unit): E = assertThrows<E> { block() }

    // --- the breaker around one call (the retry helpers: ExecuteTest) ---------------------

    @Test
    fun `coroutine cancellation is recorded as cancelled and frees the probe's slot, not its window`() = runTest {
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
        assertEquals(0L, s.probesInFlight) // the slot is free at once
        assertEquals(30.seconds, s.interval) // a failed probe would have doubled it
        assertEquals(0L, s.recoveries)
        // The probe may have reached the upstream: its window stays spent, so cancelling callers
        // still send at most one probe per interval.
        assertFalse(s.probeReady)
        assertEquals(30.seconds, s.retryAfter)
        assertTrue(breaker.allow() is Admission.Refused)
        clock.set(60.seconds)
        assertTrue((breaker.allow() as Admission.Admitted).probe)
    }

    @Test
    fun `a timeout inside the call is recorded as a timeout (a failure)`() = runTest {
        val breaker = Breaker(trip1, ManualClock())
        assertThrows<TimeoutCancellationException> {
            breaker.execute { withTimeout(10) { delay(100) } }
        }
        assertEquals(State.OPEN, breaker.snapshot().state)
    }

    @Test
    fun `a programming error through the breaker is recorded as cancelled and re-thrown`() = runTest {
        val breaker = Breaker(trip1, ManualClock())
        val bug = IllegalStateException("a bug")
        assertSame(bug, assertThrows<IllegalStateException> { breaker.execute { throw bug } })
        val s = breaker.snapshot()
        assertEquals(State.CLOSED, s.state)
        assertEquals(0L, s.failures)
    }

    @Test
    fun `a refusal is BreakerOpenException with the time to the next probe, and the block does not run`() = runTest {
        val clock = ManualClock()
        val breaker = Breaker(trip1, clock)
        breaker.acquire().record(Outcome.Failure)
        clock.set(10.seconds)
        var ran = false
        val e = assertThrows<BreakerOpenException> { breaker.execute { ran = true } }
        assertFalse(ran)
        assertEquals(20.seconds, e.retryAfter)
        assertEquals(0L, e.attempts)
        assertEquals("breaker_open", e.reason.stableName())
        breaker.forceOpen()
        assertNull(assertThrows<BreakerOpenException> { breaker.execute { ran = true } }.retryAfter)
        // The low-level acquire() throws the core's error of the same name.
        assertNull(assertThrows<HoldoffException.BreakerOpen> { breaker.acquire() }.retryAfter)
        assertEquals("breaker_open", assertThrows<HoldoffException.BreakerOpen> { breaker.acquire() }.code())
    }

    // --- typed errors for bad input ---------------------------------------------------------

    private fun assertConfig(field: String, block: () -> Unit) {
        val e = refused<InvalidConfigException>(block)
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
        val e = refused<InvalidInputException> { clock.set((-1).milliseconds) }
        assertEquals("at", e.field)
        assertEquals("invalid_input", e.code())
        val classifier = Classifier(null, clock)
        for (notAStatus in listOf(-1, 1000, 70000, Int.MIN_VALUE, Int.MAX_VALUE)) {
            val bad = refused<InvalidInputException> { classifier.classify(notAStatus) }
            assertEquals("status", bad.field, "$notAStatus")
        }
        val breaker = Breaker(BreakerConfig(), clock)
        val permit = breaker.acquire()
        val bad = refused<InvalidInputException> { permit.record(Outcome.RetryLater((-5).seconds)) }
        assertEquals("outcome.retry_later", bad.field)
        assertFalse(permit.isRecorded()) // a refused argument does not spend the permit
    }

    @Test
    fun `the core's errors are caught by their Kotlin names`() {
        val clock = ManualClock()
        val config = try {
            Breaker(BreakerConfig(openInterval = BackoffConfig(initial = (-1).seconds)))
            null
        } catch (e: InvalidConfigException) {
            e
        }
        assertEquals("breaker.open_interval.initial", config?.field)
        val input = try {
            Classifier(null, clock).classify(1000)
            null
        } catch (e: InvalidInputException) {
            e
        }
        assertEquals("status", input?.field)
        assertEquals("invalid_input", input?.code())
        clock.set(5.seconds)
        val backwards = try {
            clock.set(1.seconds)
            null
        } catch (e: ClockBackwardsException) {
            e
        }
        assertEquals("clock_backwards", backwards?.code())
        // Each is still the sealed HoldoffException uniffi generates.
        val any: HoldoffException? = config
        assertTrue(any is HoldoffException.InvalidConfig)
    }

    @Test
    fun `errors speak kotlin durations and name the kotlin field`() {
        val clock = ManualClock()
        fun rule(block: () -> Unit) = refused<HoldoffException>(block).let {
            when (it) {
                is InvalidConfigException -> it.rule
                is InvalidInputException -> it.rule
                else -> it.toString()
            }
        }
        // The field keeps the core's name; the rule names the Kotlin property, in Kotlin's units.
        val negative = refused<InvalidConfigException> {
            Breaker(BreakerConfig(openInterval = BackoffConfig(initial = (-1).seconds)))
        }
        assertEquals("breaker.open_interval.initial", negative.field)
        assertEquals("BreakerConfig.openInterval.initial must not be negative", negative.rule)
        val largest = ((1L shl 53) - 1).milliseconds
        assertEquals(
            "BudgetConfig.maxRateLimitDuration is too large (at most $largest)",
            rule { RetryBudget(BudgetConfig(maxRateLimitDuration = (1L shl 53).milliseconds)) },
        )
        assertEquals(
            "BudgetConfig.maxRateLimitDuration budget ${5.minutes} against a ${5.minutes} cap leaves no room to " +
                "retry: it must be at least twice BudgetConfig.retryAfterCap (room for two capped waits)",
            rule { RetryBudget(BudgetConfig(maxRateLimitDuration = 5.minutes, retryAfterCap = 5.minutes)) },
        )
        assertEquals(
            "BudgetConfig.backoff.max must be >= BudgetConfig.backoff.initial",
            rule { RetryBudget(BudgetConfig(backoff = BackoffConfig(initial = 2.seconds, max = 1.seconds))) },
        )
        assertEquals("at must not be negative", rule { clock.set((-1).milliseconds) })
        assertEquals(
            "Outcome.RetryLater.delay must not be negative",
            rule { Breaker(BreakerConfig(), clock).acquire().record(Outcome.RetryLater((-5).seconds)) },
        )
        val p = policy(clock)
        assertEquals(
            "ExecutionConfig.attemptTimeout must be greater than 0",
            rule { kotlinx.coroutines.runBlocking { p.execute(attemptTimeout = Duration.ZERO) {} } },
        )
        // The core's own messages (toString) print durations as Kotlin does.
        clock.set(90.seconds)
        val backwards = refused<ClockBackwardsException> { clock.set(1500.milliseconds) }
        assertEquals("a monotonic clock cannot go backwards (now ${90.seconds}, requested ${1500.milliseconds})", backwards.toString())
        val open = Breaker(trip1, clock).also { it.acquire().record(Outcome.Failure) }
        assertEquals("the breaker is open (next probe in ${30.seconds})", refused<HoldoffException.BreakerOpen> { open.acquire() }.toString())
    }

    @Test
    fun `a null from Java is a NullPointerException naming the parameter, before the native library`() {
        val breaker = Breaker(BreakerConfig(), ManualClock())
        val record = Breaker::class.java.getMethod("record", Permit::class.java, Outcome::class.java)
        val e = assertThrows<java.lang.reflect.InvocationTargetException> { record.invoke(breaker, null, Outcome.Success) }
        assertTrue(e.cause is NullPointerException, "${e.cause}")
        assertTrue("permit" in e.cause!!.message.orEmpty(), e.cause!!.message)
        // Where the API takes null, it means "none": no quota, the default classifier.
        val clock = ManualClock()
        Policy(Breaker(BreakerConfig(), clock), RetryBudget(BudgetConfig(), clock), null, null)
        RetryQuota(QuotaConfig()).onSuccess(null)
    }

    @Test
    fun `the clock refuses to go backwards`() {
        val clock = ManualClock()
        clock.set(10.seconds)
        val e = refused<ClockBackwardsException> { clock.set(9.seconds) }
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
        assertEquals("foreign_permit", refused<ForeignPermitException> { b.record(permit, Outcome.Success) }.code())
        assertEquals(Effect.COUNTED, a.record(permit, Outcome.Success))
        assertTrue(permit.isRecorded())
        assertEquals("permit_already_recorded", refused<PermitAlreadyRecordedException> { permit.recordSuccess() }.code())
    }

    @Test
    fun `quota leases go back once, and only to the quota that issued them`() {
        val quota = RetryQuota(QuotaConfig(capacity = 20))
        val other = RetryQuota(QuotaConfig(capacity = 20))
        val lease = (quota.acquire(true) as QuotaAcquisition.Acquired).lease
        assertEquals(10L, lease.cost()) // the timeout cost
        assertEquals(10L, quota.available())
        assertEquals(15L, (other.acquire(false) as QuotaAcquisition.Acquired).available)

        val foreign = refused<ForeignPermitException> { other.onSuccess(lease) }
        assertEquals("foreign_permit", foreign.code())
        assertEquals(10L to 15L, quota.available() to other.available()) // neither bucket moved
        assertFalse(lease.isGivenBack()) // still good for its own quota

        quota.onSuccess(lease)
        assertTrue(lease.isGivenBack())
        assertEquals(20L, quota.available())
        quota.acquire(false)
        val twice = refused<PermitAlreadyRecordedException> { quota.onSuccess(lease) }
        assertEquals("permit_already_recorded", twice.code())
        assertEquals(15L, quota.available()) // the second give-back refunded nothing
        quota.onSuccess() // a success without retry: the refill
        assertEquals(16L, quota.available())
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
    fun `once a probe is answered, the ramp runs at the first step, not the grown backoff`() {
        val clock = ManualClock()
        val b = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(1), recoveries = 2), clock)
        b.acquire().record(Outcome.Failure) // open for 30 s
        clock.set(30.seconds)
        b.acquire().record(Outcome.Failure) // the probe fails: open for the next step, 60 s
        assertEquals(60.seconds, b.snapshot().retryAfter)
        clock.set(90.seconds)
        b.acquire().record(Outcome.Success) // the upstream answers
        val s = b.snapshot()
        assertEquals(State.HALF_OPEN, s.state)
        assertEquals(30.seconds, s.interval)
        assertEquals(30.seconds, s.retryAfter) // 90 s + the first step, not + 60 s
        clock.set(120.seconds)
        b.acquire().record(Outcome.Success)
        assertEquals(State.CLOSED, b.snapshot().state)
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
        assertEquals(GroupSnapshot(keys = 2, maxKeys = 10_000, evictions = 0, overflows = 0), group.snapshot())
    }

    @Test
    fun `a full group evicts its least recently used idle breaker, and overflows when none is idle`() {
        val group = BreakerGroup(trip1, ManualClock(), maxKeys = 2)
        assertEquals(2L, group.maxKeys())
        group.get("a").acquire().recordSuccess()
        group.get("b").acquire().recordSuccess()
        group.get("a") // a is now the most recently used
        group.get("c") // evicts b, idle and least recently used
        assertEquals(listOf("a", "c"), group.keys())
        assertEquals(GroupSnapshot(keys = 2, maxKeys = 2, evictions = 1, overflows = 0), group.snapshot())

        group.get("c").acquire().record(Outcome.Failure)
        group.get("a").acquire().record(Outcome.Failure)
        assertEquals(State.OPEN, group.peek("c")?.snapshot()?.state)
        // Nothing idle to evict: b gets an overflow breaker the group does not keep.
        val b = group.get("b")
        assertEquals(State.CLOSED, b.snapshot().state)
        assertEquals(listOf("a", "c"), group.keys())
        assertNull(group.peek("b"))
        assertEquals(GroupSnapshot(keys = 2, maxKeys = 2, evictions = 1, overflows = 1), group.snapshot())
        // The open breakers are the protection: never evicted.
        assertEquals(State.OPEN, group.get("c").snapshot().state)
    }

    @Test
    fun `a group bound out of range is refused naming group max_keys`() {
        for (bad in listOf(0L, -1L, 100_000_001L)) {
            assertConfig("group.max_keys") { BreakerGroup(BreakerConfig(), null, maxKeys = bad) }
        }
        assertEquals(100_000_000L, BreakerGroup(BreakerConfig(), maxKeys = 100_000_000).maxKeys())
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

        val other = ManualClock()
        val e = refused<InvalidConfigException> { Policy(Breaker(BreakerConfig(), clock), RetryBudget(BudgetConfig(), other), quota, null) }
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
        assertEquals(HintSource.RATE_LIMIT_RESET, c.classify(429, "RateLimit-Reset" to "5").source)
        assertEquals("retry_later", c.classify(429, "RateLimit-Reset" to "5").outcome.stableName())
        // A status outside 100..599 is a broken upstream: a failure, whatever its headers say.
        for (broken in listOf(0, 99, 600, 999)) {
            assertEquals(Outcome.Failure, c.classify(broken, "x-should-retry" to "false").outcome, "$broken")
        }
    }

    @Test
    fun `provider delay headers, in the core's order of precedence`() {
        val origin = Instant.parse("2026-01-01T00:00:00Z")
        fun hint(vararg h: Pair<String, String>) = hintFromHeaders(headersOf(*h), origin)
        val ms = hint("Retry-After" to "9", "retry-after-ms" to "1500.2", "x-ms-retry-after-ms" to "700")
        assertEquals(HintSource.RETRY_AFTER_MS, ms.source)
        assertEquals(1501.milliseconds, ms.hint.delayOrNull) // decimals round up
        assertEquals(HintSource.X_MS_RETRY_AFTER_MS, hint("x-ms-retry-after-ms" to "700", "Retry-After" to "9").source)
        val rl = hint("RateLimit" to "\"a\";r=0;t=30, \"b\";r=5;t=10")
        assertEquals(HintSource.RATE_LIMIT, rl.source)
        assertEquals(30.seconds, rl.hint.delayOrNull) // the largest t among exhausted policies
        assertEquals(HintSource.X_RATE_LIMIT_RESET, hint("X-RateLimit-Reset" to "1767225660").source)
        assertEquals(HintSource.NONE, hint().source)
        // The Kotlin names come from the core's stable names.
        assertEquals(
            listOf("retry_after_ms", "x_ms_retry_after_ms", "retry_after", "ratelimit", "ratelimit_reset", "x_ratelimit_reset", "none"),
            HintSource.entries.map { it.stableName() },
        )
        assertEquals("retry_after_above_cap", GiveUpReason.RETRY_AFTER_ABOVE_CAP.stableName())
        assertEquals("half_open", State.HALF_OPEN.stableName())
        assertEquals("probe_failed", Reason.PROBE_FAILED.stableName())
        assertEquals("conflicting", Unusable.CONFLICTING.stableName())
    }

    @Test
    fun `x-should-retry is the provider's word on an answer`() {
        val c = Classifier(null, ManualClock())
        val no = c.classify(503, "x-should-retry" to "false")
        assertEquals(Outcome.Answer, no.outcome)
        assertEquals(false, no.shouldRetry)
        val yes = c.classify(409, "X-Should-Retry" to "true")
        assertEquals(Outcome.Failure, yes.outcome)
        assertEquals(true, yes.shouldRetry)
        assertEquals(Outcome.Success, c.classify(200, "x-should-retry" to "true").outcome)
        assertNull(c.classify(409, "x-should-retry" to "maybe").shouldRetry)
        assertEquals(Outcome.Answer, c.classify(409, "x-should-retry" to "maybe").outcome)
    }

    @Test
    fun `with giveUpAboveCap a Retry-After above the cap gives up at once`() {
        val clock = ManualClock()
        val waits = RetryBudget(BudgetConfig(), clock).decide(RetryState(), Outcome.RetryLater(400.seconds)) as Decision.Retry
        assertEquals(300.seconds, waits.delay)
        assertTrue(waits.capped)
        val budget = RetryBudget(BudgetConfig(giveUpAboveCap = true), clock)
        val d = budget.decide(RetryState(), Outcome.RetryLater(400.seconds)) as Decision.GiveUp
        assertEquals(GiveUpReason.RETRY_AFTER_ABOVE_CAP, d.reason)
        assertEquals(400.seconds, d.serverDelay)
        assertEquals(Decision.Retry(300.seconds, WaitSource.RETRY_AFTER, 300.seconds, false), budget.decide(RetryState(), Outcome.RetryLater(300.seconds)))
    }

    @Test
    fun `a policy told a value that is not a status refuses it and frees the probe`() {
        val clock = ManualClock()
        val p = policy(clock, breaker = trip1)
        p.breaker().acquire().record(Outcome.Failure) // open: next probe at 30 s
        clock.set(30.seconds)
        for ((i, notAStatus) in listOf(70000, -1).withIndex()) {
            val call = PolicyCall()
            val go = p.beforeAttempt(call) as Before.Go
            assertTrue(go.probe)
            val e = refused<InvalidInputException> { p.afterResponse(call, go.permit, notAStatus, emptyList()) }
            assertEquals("status", e.field)
            assertTrue(go.permit.isRecorded()) // recorded as cancelled: the slot is free at once
            val s = p.breaker().snapshot()
            assertEquals(0L, s.probesInFlight)
            assertEquals(State.HALF_OPEN, s.state)
            assertEquals(i + 1L, s.probes)
            assertEquals(0L, s.recoveries) // nothing counted as an answer or a failure
            assertEquals(30.seconds, s.interval)
            clock.advance(30.seconds) // the window it spent stays spent: the next probe 30 s on
        }
        // A broken status is an answer of sorts: a failure.
        val call = PolicyCall()
        val go = p.beforeAttempt(call) as Before.Go
        val r = p.afterResponse(call, go.permit, 600, emptyList())
        assertEquals(Outcome.Failure, r.classification.outcome)
        assertEquals(State.OPEN, p.breaker().snapshot().state)
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
        assertThrows<PermitAlreadyRecordedException> { p.recordSuccess() }
    }
}
