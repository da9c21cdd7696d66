package dev.holdoff

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.nio.file.Files
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource

/**
 * The fleet option: its errors, two breakers sharing a `memory://` store on one manual clock, and
 * a real redis-server (started here on a unix socket in a temporary directory) with the
 * background threads stopped by close.
 */
class FleetTest {
    private val trip1 = BreakerConfig(trip = TripPolicy.Consecutive(1))

    private fun refusedField(block: () -> Unit): InvalidConfigException = assertThrows<InvalidConfigException> { block() }

    @Test
    fun `the core validates the option and errors name the field in Kotlin's terms`() {
        val bad = mapOf(
            FleetConfig("http://127.0.0.1/", "k") to "fleet.url",
            FleetConfig("memory://", "k") to "fleet.url",
            FleetConfig("memory://a", "") to "fleet.key",
            FleetConfig("memory://a", "two words") to "fleet.key",
            FleetConfig("memory://a", "k", refresh = 0.milliseconds) to "fleet.refresh",
            FleetConfig("memory://a", "k", fallbackAfter = (-1).seconds) to "fleet.fallback_after",
            FleetConfig("memory://a", "k", timeout = kotlin.time.Duration.INFINITE) to "fleet.timeout",
            FleetConfig("memory://a", "k", ttl = 0.seconds) to "fleet.ttl",
        )
        for ((fleet, field) in bad) {
            val e = refusedField { Breaker(BreakerConfig(), ManualClock(), fleet) }
            assertEquals(field, e.field, "$fleet")
            assertEquals("invalid_config", e.code())
        }
        val e = refusedField { Breaker(BreakerConfig(), fleet = FleetConfig("memory://a", "k", fallbackAfter = (-1).seconds)) }
        assertTrue(e.rule.startsWith("FleetConfig.fallbackAfter "), e.rule)
        // Groups stay local: any fleet is refused, naming the parameter.
        val g = refusedField { BreakerGroup(BreakerConfig(), fleet = FleetConfig("memory://a", "k")) }
        assertEquals("fleet", g.field)
        val i = assertThrows<InvalidInputException> { memoryStoreControl("a", "sideways") }
        assertEquals("action", i.field)
    }

    @Test
    fun `a trip at one worker opens the other at its next sync, and closing unlinks`() {
        val store = "kotlin-fleet-test-memory"
        memoryStoreReset(store)
        val clock = ManualClock()
        val fleet = FleetConfig("memory://$store", "payments")
        val a = Breaker(trip1, clock, fleet)
        val b = Breaker(trip1, clock, fleet)
        assertNull(Breaker(trip1, clock).syncFleet()) // no fleet, no tick
        a.acquire().record(Outcome.Failure)
        val sa = a.syncFleet()!!
        assertTrue(sa.ok && sa.attached)
        assertEquals(FleetState.OPEN, sa.record!!.state)
        assertEquals("open", sa.record!!.state.stableName())
        assertEquals(1L, sa.record!!.episode)
        assertEquals(30.seconds, sa.record!!.nextProbeAt) // the store's clock is the manual clock
        assertEquals(State.CLOSED, b.snapshot().state)
        val sb = b.syncFleet()!!
        assertEquals(1L, sb.record!!.episode)
        assertEquals(State.OPEN, b.snapshot().state)
        assertEquals(30.seconds, b.snapshot().retryAfter)
        assertEquals(Reason.FLEET_OPENED, b.drainEvents().single().reason)
        assertEquals("fleet_opened", Reason.FLEET_OPENED.stableName())
        assertTrue(b.allow() is Admission.Refused)

        // The store down: the tick reports it, nothing throws; after fallbackAfter (1 s) the
        // breaker detaches and is a local one.
        memoryStoreControl(store, "down")
        clock.advance(2.seconds)
        val down = b.syncFleet()!!
        assertFalse(down.ok)
        assertNull(down.record)
        assertTrue(down.error!!.isNotEmpty())
        assertFalse(down.attached)
        assertTrue(down.detached)
        assertFalse(b.fleetAttached())
        memoryStoreControl(store, "up")
        assertTrue(b.syncFleet()!!.reattached)
        assertTrue(b.fleetAttached())

        b.closeFleet()
        b.closeFleet() // idempotent
        assertNull(b.syncFleet())
        assertFalse(b.fleetAttached())
        listOf(a, b).forEach { it.close() }
    }

    @Test
    fun `a policy keeps its breaker's fleet`() {
        val store = "kotlin-fleet-test-policy"
        memoryStoreReset(store)
        val clock = ManualClock()
        val breaker = Breaker(trip1, clock, FleetConfig("memory://$store", "search"))
        val policy = Policy(breaker, RetryBudget(BudgetConfig(), clock))
        breaker.close() // the policy still holds it, and with it the fleet
        policy.breaker().acquire().record(Outcome.Failure)
        assertEquals(FleetState.OPEN, policy.breaker().syncFleet()!!.record!!.state)
        policy.close()
    }

    @Test
    fun `on a real redis-server a trip reaches the other worker in the background, and close stops the threads`() {
        val dir = Files.createTempDirectory("holdoff-kotlin-redis").toFile()
        val socket = File(dir, "redis.sock")
        val server = ProcessBuilder(
            "redis-server", "--port", "0", "--unixsocket", socket.path, "--save", "", "--appendonly", "no",
        ).redirectErrorStream(true).redirectOutput(File(dir, "redis.log")).start()
        try {
            waitFor("redis-server's socket") { socket.exists() }
            val fleet = FleetConfig("unix://${socket.path}", "kotlin-test-${ProcessHandle.current().pid()}", refresh = 20.milliseconds)
            val before = fleetThreads()
            val a = Breaker(trip1, fleet = fleet)
            val b = Breaker(trip1, fleet = fleet)
            waitFor("a sync and a subscriber thread each") { fleetThreads() == before + 4 }
            waitFor("both attached") { a.fleetAttached() && b.fleetAttached() }
            a.acquire().record(Outcome.Failure)
            // Nobody ticks by hand: the background threads carry the open to b.
            waitFor("b opened by the fleet") { b.snapshot().state == State.OPEN }
            assertEquals(Reason.FLEET_OPENED, b.drainEvents().last().reason)
            assertTrue(b.allow() is Admission.Refused)
            a.close()
            b.close()
            waitFor("the fleet threads stopped") { fleetThreads() == before }
        } finally {
            server.destroy()
            server.waitFor(5, TimeUnit.SECONDS)
            dir.deleteRecursively()
        }
    }

    /** Native threads of this process named by holdoff-fleet (Linux: /proc/self/task/<id>/comm). */
    private fun fleetThreads(): Int =
        File("/proc/self/task").listFiles().orEmpty().count { t ->
            runCatching { File(t, "comm").readText().startsWith("holdoff-fleet") }.getOrDefault(false)
        }

    /** Polls [done] on the real clock for up to 5 s (a generous bound on a loaded machine). */
    private fun waitFor(what: String, done: () -> Boolean) {
        val start = TimeSource.Monotonic.markNow()
        while (!done()) {
            if (start.elapsedNow() > 5.seconds) throw AssertionError("timed out waiting for $what")
            Thread.sleep(5)
        }
    }
}
