// Retries in traces: the retry helpers add an event to the caller's current OpenTelemetry span
// for each wait they decide and one when the call gives up, when the OpenTelemetry API is on the
// classpath. It is an optional dependency: without it nothing here touches its classes.

package dev.holdoff

import io.opentelemetry.api.common.Attributes
import io.opentelemetry.api.trace.Span
import kotlin.time.DurationUnit

/**
 * The span events of the retry helpers (the same names in every language):
 *
 * * `holdoff.retry`, before each wait: `holdoff.attempt` (long, the attempt that just ended,
 *   1-based), `holdoff.outcome` (that attempt's outcome, `Outcome.stableName()`),
 *   `holdoff.delay` (double, seconds), `holdoff.source` (`retry_after`, `backoff`, `breaker`),
 *   `holdoff.capped` (boolean);
 * * `holdoff.give_up`, when the call fails with holdoff's "upstream unavailable" error (a
 *   give-up, the breaker open; not a final answer handed back): `holdoff.attempts` (long),
 *   `holdoff.reason` (`GiveUpReason.stableName()`).
 *
 * Added only to a span that is recording. A call that succeeds at once adds nothing (nothing
 * runs on that path). In coroutines, `Span.current()` is the thread's: carry the span across
 * suspensions with opentelemetry-extension-kotlin's `asContextElement()` (or the Java agent).
 */
internal object RetryEvents {
    private val present: Boolean = try {
        Class.forName("io.opentelemetry.api.trace.Span", false, RetryEvents::class.java.classLoader)
        true
    } catch (_: Throwable) {
        false
    }

    fun waiting(plan: WaitPlan, outcome: Outcome?) {
        if (present) OtelEvents.waiting(plan, outcome)
    }

    fun finished(verdict: Verdict) {
        if (!present) return
        when (verdict) {
            is Verdict.GiveUp -> OtelEvents.gaveUp(verdict.gaveUp.attempts, verdict.gaveUp.reason)
            is Verdict.BreakerOpen -> OtelEvents.gaveUp(verdict.attempts, GiveUpReason.BREAKER_OPEN)
            else -> {}
        }
    }
}

/** The calls into the OpenTelemetry API; loaded only when the API is present. */
private object OtelEvents {
    fun waiting(plan: WaitPlan, outcome: Outcome?) {
        val span = Span.current()
        if (!span.isRecording) return
        val a = Attributes.builder()
            .put("holdoff.attempt", plan.attempts)
            .put("holdoff.delay", plan.delay.toDouble(DurationUnit.SECONDS))
            .put("holdoff.source", plan.source.stableName())
            .put("holdoff.capped", plan.capped)
        outcome?.let { a.put("holdoff.outcome", it.stableName()) }
        span.addEvent("holdoff.retry", a.build())
    }

    fun gaveUp(attempts: Long, reason: GiveUpReason) {
        val span = Span.current()
        if (!span.isRecording) return
        span.addEvent(
            "holdoff.give_up",
            Attributes.builder().put("holdoff.attempts", attempts).put("holdoff.reason", reason.stableName()).build(),
        )
    }
}
