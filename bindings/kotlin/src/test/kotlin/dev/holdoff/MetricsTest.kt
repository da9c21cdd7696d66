package dev.holdoff

import io.micrometer.core.instrument.FunctionCounter
import io.micrometer.core.instrument.Gauge
import io.micrometer.core.instrument.MeterRegistry
import io.micrometer.core.instrument.simple.SimpleMeterRegistry
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter
import io.opentelemetry.sdk.trace.SdkTracerProvider
import io.opentelemetry.sdk.trace.data.EventData
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.IOException
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * The metric model through Kotlin (the table, each object's readings), the Micrometer binder after
 * scripted scenarios on the manual clock, and the retry span events with the OpenTelemetry SDK's
 * in-memory exporter.
 */
class MetricsTest {
    private val tripAt5 = BreakerConfig(
        trip = TripPolicy.Consecutive(5),
        openInterval = BackoffConfig(initial = 1.seconds, multiplier = 1.0),
        recoveries = 1,
    )

    /**
     * What a scrape sees: every meter read once, as `name{k=v,...}` (tags sorted) to its value,
     * zeros dropped (so an assertion lists exactly the series that moved).
     */
    private fun scrape(registry: MeterRegistry): Map<String, Double> = registry.meters.mapNotNull { m ->
        val v = m.measure().single().value
        val tags = m.id.tags.sortedBy { it.key }.joinToString(",") { "${it.key}=${it.value}" }
        if (v == 0.0) null else (if (tags.isEmpty()) m.id.name else "${m.id.name}{$tags}") to v
    }.toMap()

    private fun calls(b: Breaker, outcome: Outcome, n: Int) = repeat(n) {
        when (val a = b.allow()) {
            is Admission.Admitted -> a.permit.record(outcome)
            is Admission.Refused -> {}
        }
    }

    @Test
    fun `the table is the core's`() {
        val t = metricTable()
        assertEquals(17, t.size)
        val d = t.single { it.name == "holdoff.retry.wait.duration" }
        assertEquals(MetricKind.COUNTER, d.kind)
        assertEquals("s", d.unit)
        assertEquals("source", d.attribute)
        assertEquals(listOf("retry_after", "backoff", "breaker"), d.values)
        assertEquals("gauge", t.single { it.name == "holdoff.quota.tokens" }.kind.stableName())
    }

    @Test
    fun `readings start at the first read and name their attributes`() {
        val clock = ManualClock()
        val b = Breaker(tripAt5, clock)
        calls(b, Outcome.Failure, 2) // before the first read: not counted
        val first = b.metrics()
        assertEquals(24, first.size)
        assertEquals(0.0, first.single { it.name == "holdoff.breaker.admitted" }.value)
        calls(b, Outcome.Failure, 1)
        val r = b.metrics()
        assertEquals(1.0, r.single { it.name == "holdoff.breaker.admitted" }.value)
        assertEquals(
            1.0,
            r.single { it.name == "holdoff.breaker.outcomes" && it.attributes == mapOf("outcome" to "failure") }.value,
        )
        assertEquals(1.0, r.single { it.name == "holdoff.breaker.state" && it.attributes["state"] == "closed" }.value)
    }

    @Test
    fun `a breaker and a policy bound to Micrometer report a trip, refusals, a probe and a retry after Retry-After`() {
        val clock = ManualClock()
        val registry = SimpleMeterRegistry()
        val b = Breaker(tripAt5, clock)
        HoldoffMetrics(b, upstream = "payments").bindTo(registry)
        calls(b, Outcome.Failure, 5) // trips
        calls(b, Outcome.Success, 2) // refused while open
        clock.advance(1.seconds)
        calls(b, Outcome.Success, 1) // the probe, which closes it

        val policy = Policy(
            Breaker(BreakerConfig(recoveries = 1), clock),
            RetryBudget(BudgetConfig(), clock),
            RetryQuota(QuotaConfig(capacity = 100, retryCost = 5)),
        )
        HoldoffMetrics(policy, upstream = "search").bindTo(registry)
        var n = 0
        val got = runBlocking {
            policy.execute(sleep = { clock.advance(it) }) {
                if (++n == 1) throw RetryLaterException(2.seconds) else "ok"
            }
        }
        assertEquals("ok", got)

        assertEquals(
            mapOf(
                "holdoff.breaker.state{state=closed,upstream=payments}" to 1.0,
                "holdoff.breaker.admitted{upstream=payments}" to 6.0,
                "holdoff.breaker.refused{upstream=payments}" to 2.0,
                "holdoff.breaker.outcomes{outcome=failure,upstream=payments}" to 5.0,
                "holdoff.breaker.outcomes{outcome=success,upstream=payments}" to 1.0,
                "holdoff.breaker.probes{upstream=payments}" to 1.0,
                "holdoff.breaker.transitions{reason=tripped,upstream=payments}" to 1.0,
                "holdoff.breaker.transitions{reason=probe_admitted,upstream=payments}" to 1.0,
                "holdoff.breaker.transitions{reason=recovered,upstream=payments}" to 1.0,
                // The policy's breaker: opened by the Retry-After, probed after 2 s, closed.
                "holdoff.breaker.state{state=closed,upstream=search}" to 1.0,
                "holdoff.breaker.admitted{upstream=search}" to 2.0,
                "holdoff.breaker.outcomes{outcome=retry_later,upstream=search}" to 1.0,
                "holdoff.breaker.outcomes{outcome=success,upstream=search}" to 1.0,
                "holdoff.breaker.probes{upstream=search}" to 1.0,
                "holdoff.breaker.transitions{reason=retry_later,upstream=search}" to 1.0,
                "holdoff.breaker.transitions{reason=probe_admitted,upstream=search}" to 1.0,
                "holdoff.breaker.transitions{reason=recovered,upstream=search}" to 1.0,
                // The retry paid 5 tokens and the success gave them back.
                "holdoff.quota.tokens{upstream=search}" to 100.0,
                "holdoff.retry.attempts{upstream=search}" to 2.0,
                "holdoff.retry.retries{upstream=search}" to 1.0,
                "holdoff.retry.waits{source=retry_after,upstream=search}" to 1.0,
                "holdoff.retry.wait.duration{source=retry_after,upstream=search}" to 2.0,
            ),
            scrape(registry),
        )
        // One meter per series, zeros included: 24 for a breaker; 24 + 2 + 19 for the policy.
        assertEquals(24 + 45, registry.meters.size)
        val duration = registry.get("holdoff.retry.wait.duration").tags("source", "retry_after").functionCounter()
        assertInstanceOf(FunctionCounter::class.java, duration)
        assertEquals("seconds", duration.id.baseUnit)
        assertEquals("Total time of the waits decided before retries, by source.", duration.id.description)
        assertInstanceOf(Gauge::class.java, registry.get("holdoff.quota.tokens").meter())
    }

    @Test
    fun `a group's new keys get meters at the next read and evicted ones lose theirs`() {
        val clock = ManualClock()
        val registry = SimpleMeterRegistry()
        val g = BreakerGroup(BreakerConfig(), clock, maxKeys = 1)
        HoldoffMetrics(g).bindTo(registry)
        assertEquals(2, registry.meters.size) // no key yet
        calls(g.get("a"), Outcome.Success, 1)
        assertEquals(mapOf("holdoff.group.keys" to 1.0), scrape(registry)) // registers a's meters
        assertEquals(
            mapOf(
                "holdoff.group.keys" to 1.0,
                "holdoff.breaker.state{state=closed,upstream=a}" to 1.0,
                "holdoff.breaker.admitted{upstream=a}" to 1.0,
                "holdoff.breaker.outcomes{outcome=success,upstream=a}" to 1.0,
            ),
            scrape(registry),
        )
        calls(g.get("b"), Outcome.Failure, 1) // evicts a (idle) for b
        scrape(registry)
        assertEquals(
            mapOf(
                "holdoff.group.keys" to 1.0,
                "holdoff.group.evictions" to 1.0,
                "holdoff.breaker.state{state=closed,upstream=b}" to 1.0,
                "holdoff.breaker.admitted{upstream=b}" to 1.0,
                "holdoff.breaker.outcomes{outcome=failure,upstream=b}" to 1.0,
            ),
            scrape(registry),
        )
        assertEquals(2 + 24, registry.meters.size)
    }

    @Test
    fun `a blank upstream is refused naming it`() {
        val e = assertThrows<InvalidInputException> { HoldoffMetrics(RetryQuota(QuotaConfig()), upstream = " ") }
        assertEquals("upstream", e.field)
    }

    // --- retry span events ------------------------------------------------------------------

    private fun traced(run: suspend () -> Unit): List<EventData> {
        val exporter = InMemorySpanExporter.create()
        val provider = SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build()
        val span = provider.get("holdoff-test").spanBuilder("call").startSpan()
        span.makeCurrent().use { runBlocking { run() } }
        span.end()
        // Read before closing: shutting the provider down clears the exporter.
        val events = exporter.finishedSpanItems.single().events
        provider.close()
        return events
    }

    private fun EventData.attrs(): Map<String, Any> = attributes.asMap().mapKeys { it.key.key }

    @Test
    fun `a wait after a Retry-After is an event on the current span`() {
        val clock = ManualClock()
        val p = Policy(Breaker(tripAt5, clock), RetryBudget(BudgetConfig(), clock))
        var n = 0
        val events = traced {
            p.execute(sleep = { clock.advance(it) }) { if (++n == 1) throw RetryLaterException(1500.milliseconds) else "ok" }
        }
        assertEquals(listOf("holdoff.retry"), events.map { it.name })
        assertEquals(
            mapOf(
                "holdoff.attempt" to 1L,
                "holdoff.outcome" to "retry_later",
                "holdoff.delay" to 1.5,
                "holdoff.source" to "retry_after",
                "holdoff.capped" to false,
            ),
            events[0].attrs(),
        )
    }

    @Test
    fun `a backoff wait and the give-up after it are events on the current span`() {
        val clock = ManualClock()
        val p = Policy(
            Breaker(tripAt5, clock),
            RetryBudget(BudgetConfig(maxRetries = 1, backoff = BackoffConfig(initial = 100.milliseconds, jitter = 0.0)), clock),
        )
        var error: Throwable? = null
        val events = traced {
            error = runCatching { p.execute<Unit>(sleep = { clock.advance(it) }) { throw IOException("reset") } }.exceptionOrNull()
        }
        assertEquals(GiveUpReason.ATTEMPTS_EXHAUSTED, assertInstanceOf(GiveUpException::class.java, error).reason)
        assertEquals(listOf("holdoff.retry", "holdoff.give_up"), events.map { it.name })
        assertEquals(
            mapOf(
                "holdoff.attempt" to 1L,
                "holdoff.outcome" to "failure",
                "holdoff.delay" to 0.1,
                "holdoff.source" to "backoff",
                "holdoff.capped" to false,
            ),
            events[0].attrs(),
        )
        assertEquals(mapOf("holdoff.attempts" to 2L, "holdoff.reason" to "attempts_exhausted"), events[1].attrs())
    }

    @Test
    fun `a call that succeeds at once adds no event, a refusal adds a give-up`() {
        val clock = ManualClock()
        val b = Breaker(BreakerConfig(), clock)
        val p = Policy(b, RetryBudget(BudgetConfig(), clock))
        assertEquals(emptyList<EventData>(), traced { p.execute(sleep = { clock.advance(it) }) { "ok" } })
        b.forceOpen()
        var error: Throwable? = null
        val events = traced { error = runCatching { p.execute(sleep = { clock.advance(it) }) { "ok" } }.exceptionOrNull() }
        assertInstanceOf(BreakerOpenException::class.java, error)
        assertEquals(listOf("holdoff.give_up"), events.map { it.name })
        assertEquals(mapOf("holdoff.attempts" to 0L, "holdoff.reason" to "breaker_open"), events[0].attrs())
    }
}
