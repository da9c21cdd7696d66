package dev.holdoff

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.IOException
import java.util.concurrent.CyclicBarrier
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.test.runTest
import kotlin.time.Duration.Companion.days
import kotlin.time.Duration.Companion.nanoseconds
import kotlin.time.Duration.Companion.seconds

/** The fast-path word read in place: admissions and clean successes without the library, the rest through it. */
class FastPathTest {
    private fun breaker(threshold: Long, clock: ManualClock = ManualClock()) =
        Breaker(BreakerConfig(trip = TripPolicy.Consecutive(threshold)), clock)

    @Test
    fun `a closed breaker admits on the word and a permit's success settles there`() {
        val b = breaker(3)
        val fast = b.fastPath()
        assertTrue(fast.enabled)
        val p = fast.acquire()
        assertTrue(p is WordPermit, "admitted on the word")
        assertEquals(0L, p.episode())
        assertFalse(p.isProbe())
        assertFalse(p.isRecorded())
        assertEquals(Effect.COUNTED, p.record(Outcome.Success))
        assertTrue(p.isRecorded())
        val a = fast.allow() as Admission.Admitted
        assertTrue(a.permit is WordPermit)
        assertEquals(0L, a.episode)
        assertFalse(a.probe)
        a.permit.recordSuccess()
        val s = b.snapshot()
        assertEquals(State.CLOSED, s.state)
        assertEquals(0L, s.failures)
    }

    @Test
    fun `a success while failures are pending reaches the library and forgets them`() {
        val b = breaker(3)
        val fast = b.fastPath()
        repeat(2) { assertEquals(Effect.COUNTED, fast.acquire().record(Outcome.Failure)) }
        assertEquals(2L, b.snapshot().failures)
        fast.acquire().recordSuccess() // not clean: the library resets the count
        assertEquals(0L, b.snapshot().failures)
        repeat(2) { fast.acquire().record(Outcome.Failure) }
        assertEquals(State.CLOSED, b.snapshot().state, "two failures after the success: below the threshold")
        fast.acquire().record(Outcome.Failure)
        val s = b.snapshot()
        assertEquals(State.OPEN, s.state)
        assertEquals(1L, s.opens)
    }

    @Test
    fun `a permit from an earlier episode is stale, never a clean success`() {
        val b = breaker(1)
        val fast = b.fastPath()
        val early = fast.acquire()
        val other = fast.acquire()
        assertEquals(Effect.COUNTED, other.record(Outcome.Failure)) // trips: episode 1
        b.reset() // closed again, episode 2
        assertEquals(State.CLOSED, b.snapshot().state)
        assertEquals(Effect.STALE, early.record(Outcome.Success))
        val s = b.snapshot()
        assertEquals(1L, s.staleAnswers)
        assertEquals(1L, s.opens)
        assertEquals(Effect.COUNTED, fast.acquire().record(Outcome.Success), "a permit of the new episode is current")
    }

    @Test
    fun `an open breaker refuses through the library, counted`() {
        val clock = ManualClock()
        val b = breaker(1, clock)
        val fast = b.fastPath()
        fast.acquire().record(Outcome.Failure)
        clock.set(10.seconds)
        val e = assertThrows<HoldoffException.BreakerOpen> { fast.acquire() }
        assertEquals(20.seconds, e.retryAfter)
        val r = fast.allow() as Admission.Refused
        assertEquals(State.OPEN, r.state)
        assertEquals(2L, b.snapshot().refusals)
        assertEquals(20.seconds, r.retryAfter)
        assertEquals(1L, r.episode)
        clock.set(30.seconds)
        val probe = fast.allow() as Admission.Admitted
        assertTrue(probe.probe)
        assertEquals(1L, probe.episode)
        assertTrue(probe.permit is WordPermit, "admitted by the plain call")
        assertTrue(probe.permit.isProbe())
        assertEquals(1L, probe.permit.episode())
        assertEquals(State.HALF_OPEN, b.snapshot().state)
        assertEquals(1L, b.snapshot().probesInFlight)
        assertEquals(Effect.COUNTED, fast.record(probe.permit, Outcome.Success))
        assertThrows<PermitAlreadyRecordedException> { probe.permit.recordSuccess() }
        val s = b.snapshot()
        assertEquals(1L, s.recoveries, "the probe's answer reached the library")
        assertEquals(0L, s.probesInFlight)
        b.forceOpen()
        val forced = fast.allow() as Admission.Refused
        assertEquals(State.FORCED_OPEN, forced.state)
        assertNull(forced.retryAfter)
        assertNull(assertThrows<HoldoffException.BreakerOpen> { fast.acquire() }.retryAfter)
        b.disable()
        val d = fast.acquire()
        assertFalse(d.isProbe())
        assertEquals(Effect.COUNTED, d.record(Outcome.Failure))
        assertEquals(State.DISABLED, b.snapshot().state)
        assertEquals(1L, b.snapshot().failures, "a disabled breaker counts what it sees")
    }

    @Test
    fun `a refusal is one call with its exact wait, through JNI and through JNA alike`() {
        assertTrue(DirectJni.bound, "the library's JNI methods are bound where the tests load it")
        for (jni in listOf(true, false)) {
            val clock = ManualClock()
            val b = breaker(1, clock)
            val fast = FastPath(b, b.fastPathLayout(), jni)
            fast.acquire().record(Outcome.Failure)
            clock.set(10.seconds + 7.nanoseconds)
            val r = fast.allow() as Admission.Refused
            assertEquals(20.seconds - 7.nanoseconds, r.retryAfter, "jni=$jni")
            assertEquals(State.OPEN, r.state)
            assertEquals(1L, r.episode)
            assertEquals(20.seconds - 7.nanoseconds, assertThrows<HoldoffException.BreakerOpen> { fast.acquire() }.retryAfter)
            assertEquals(2L, b.snapshot().refusals, "each refusal counted once, jni=$jni")
            b.forceOpen()
            val forced = fast.allow() as Admission.Refused
            assertEquals(State.FORCED_OPEN, forced.state)
            assertNull(forced.retryAfter)
            assertSame(forced, fast.allow(), "a forced-open refusal is reused while it says the same")
            assertEquals(4L, b.snapshot().refusals, "a reused refusal is still counted")
            b.reset()
            b.forceOpen()
            val next = fast.allow() as Admission.Refused
            assertNotEquals(forced.episode, next.episode, "a new episode, a new refusal")
            assertEquals(Admission.Refused(null, State.FORCED_OPEN, next.episode), next)
        }
    }

    @Test
    fun `a wait too long to pack reaches the caller exactly, through JNI and through JNA`() {
        for (jni in listOf(true, false)) {
            val clock = ManualClock()
            val b = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(1), openInterval = BackoffConfig(initial = 1.days, max = 1.days)), clock)
            val fast = FastPath(b, b.fastPathLayout(), jni)
            fast.acquire().record(Outcome.Failure)
            clock.set(3.nanoseconds)
            assertEquals(Admission.Refused(1.days - 3.nanoseconds, State.OPEN, 1L), fast.allow(), "jni=$jni")
            assertEquals(1.days - 3.nanoseconds, assertThrows<HoldoffException.BreakerOpen> { fast.acquire() }.retryAfter)
            assertEquals(2L, b.snapshot().refusals)
        }
    }

    @Test
    fun `a permit admitted on the word is recorded once, and only by its breaker`() {
        val b = breaker(5)
        val fast = b.fastPath()
        val otherFast = breaker(5).fastPath()
        val p = fast.acquire()
        assertThrows<ForeignPermitException> { otherFast.record(p, Outcome.Success) }
        assertFalse(p.isRecorded(), "a foreign record leaves the permit usable")
        val bad = assertThrows<InvalidInputException> { p.record(Outcome.RetryLater((-1).seconds)) }
        assertEquals("outcome.retry_later", bad.field)
        assertFalse(p.isRecorded(), "a refused argument does not spend the permit")
        assertEquals(Effect.COUNTED, fast.record(p, Outcome.Failure))
        assertEquals("permit_already_recorded", assertThrows<PermitAlreadyRecordedException> { p.recordSuccess() }.code())
        assertThrows<PermitAlreadyRecordedException> { p.record(Outcome.Failure) }
        assertThrows<PermitAlreadyRecordedException> { fast.record(p, Outcome.Success) }
        assertEquals(1L, b.snapshot().failures, "the second records counted nothing")
        // The library's own permits go through unchanged, foreign ones refused by it.
        assertThrows<ForeignPermitException> { fast.record(otherFast.breaker.acquire(), Outcome.Success) }
        val native = b.acquire()
        assertEquals(Effect.COUNTED, fast.record(native, Outcome.Success))
        assertThrows<PermitAlreadyRecordedException> { fast.record(native, Outcome.Success) }
        assertEquals(0L, b.snapshot().failures)
    }

    @Test
    fun `counting metrics and a timed policy send calls to the library`() {
        val counted = breaker(5)
        val fast = counted.fastPath()
        counted.metrics() // an exporter attached: every call is counted from now on
        repeat(3) { fast.acquire().recordSuccess() }
        val m = counted.metrics()
        assertEquals(3.0, m.single { it.name == "holdoff.breaker.admitted" }.value)
        assertEquals(3.0, m.single { it.name == "holdoff.breaker.outcomes" && it.attributes == mapOf("outcome" to "success") }.value)
        val windowed = Breaker(BreakerConfig(trip = TripPolicy.Window(2, 10.seconds)), ManualClock())
        val wf = windowed.fastPath()
        val a = wf.acquire()
        assertTrue(a is WordPermit, "a window policy still admits on the word")
        a.recordSuccess() // but every outcome reaches the library, which reads the clock
        repeat(2) { wf.acquire().record(Outcome.Failure) }
        assertEquals(State.OPEN, windowed.snapshot().state)
    }

    @Test
    fun `after the breaker is closed the fast path throws as the breaker does`() {
        val b = breaker(5)
        val fast = b.fastPath()
        val p = fast.acquire()
        b.close()
        assertThrows<IllegalStateException> { b.allow() }
        assertThrows<IllegalStateException> { fast.acquire() }
        assertThrows<IllegalStateException> { fast.allow() }
        assertThrows<IllegalStateException> { fast.record(p, Outcome.Success) }
        val q = breaker(5).fastPath().acquire()
        q.close()
        assertThrows<IllegalStateException> { q.recordSuccess() }
    }

    @Test
    fun `execute admits and records on the word and the failures through the library`() = runTest {
        val b = breaker(2)
        val fast = b.fastPath()
        assertEquals(42, fast.execute { 42 })
        assertThrows<IOException> { fast.execute { throw IOException("refused") } }
        assertEquals(1L, b.snapshot().failures)
        assertEquals(7, fast.execute { 7 })
        assertEquals(0L, b.snapshot().failures)
        repeat(2) { assertThrows<IOException> { fast.execute { throw IOException("refused") } } }
        var ran = false
        val e = assertThrows<BreakerOpenException> { fast.execute { ran = true } }
        assertFalse(ran)
        assertEquals(30.seconds, e.retryAfter)
        assertEquals(1L, b.snapshot().opens)
    }

    /**
     * Threads mixing clean successes on the word with failures through the library on one breaker
     * that trips on every failure, resetting it when refused: every counted failure is a trip
     * (none lost to a concurrent fast success), and the library's refusal and stale counts match
     * what the callers were told.
     */
    @Test
    fun `fast successes and library failures on one breaker keep exact books`() {
        val b = breaker(1)
        val fast = b.fastPath()
        val threads = 3
        val opsPerThread = 20_000
        class Books {
            var wordAdmits = 0L
            var libraryAdmits = 0L
            var refusals = 0L
            var resets = 0L
            var countedFailures = 0L
            var staleAnswers = 0L
            var countedSuccesses = 0L
        }
        val start = CyclicBarrier(threads)
        val pool = Executors.newFixedThreadPool(threads)
        val books = (0 until threads).map { t ->
            pool.submit<Books> {
                val k = Books()
                start.await()
                for (i in 0 until opsPerThread) {
                    val p = try {
                        fast.acquire()
                    } catch (e: HoldoffException.BreakerOpen) {
                        k.refusals++
                        b.reset()
                        k.resets++
                        continue
                    }
                    if (p is WordPermit) k.wordAdmits++ else k.libraryAdmits++
                    val failure = (i + t) % 37 == 0
                    when (p.record(if (failure) Outcome.Failure else Outcome.Success)) {
                        Effect.COUNTED -> if (failure) k.countedFailures++ else k.countedSuccesses++
                        Effect.STALE -> k.staleAnswers++
                        Effect.IGNORED -> error("nothing here is ignored")
                    }
                }
                k
            }
        }.map { it.get(60, TimeUnit.SECONDS) }
        pool.shutdown()
        val s = b.snapshot()
        val sum = { f: (Books) -> Long -> books.sumOf(f) }
        assertEquals(sum { it.countedFailures }, s.opens, "every counted failure tripped the breaker once")
        assertEquals(sum { it.refusals }, s.refusals)
        assertEquals(sum { it.staleAnswers }, s.staleAnswers)
        assertEquals(threads.toLong() * opsPerThread, sum { it.wordAdmits + it.libraryAdmits + it.refusals })
        assertEquals(0L, sum { it.libraryAdmits }, "every admission on the word or by the plain call")
        assertTrue(sum { it.countedFailures } > 0)
        assertTrue(sum { it.countedSuccesses } > 0)
        // After everyone stopped: the breaker is open exactly when the last counted act was a trip.
        if (s.state == State.OPEN) b.reset()
        assertTrue(fast.acquire() is WordPermit)
    }
}
