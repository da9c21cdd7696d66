package dev.holdoff

import org.junit.jupiter.api.Tag
import org.junit.jupiter.api.Test

/**
 * allow + record from Kotlin in a warmed loop (run by `bench/kotlin/run.sh`, excluded from the binding's `test`).
 * Wall-clock figures, informational: every call crosses JNA, which costs microseconds.
 */
@Tag("bench")
class BenchTest {
    // Time-boxed rounds (the machine may be shared): warm up, then the median of 5 rounds of
    // ~1 s each, in ns per operation.
    private fun measure(name: String, op: () -> Unit) {
        fun round(budgetNs: Long): Double {
            var n = 0L
            val t0 = System.nanoTime()
            var t: Long
            do {
                repeat(1000) { op() }
                n += 1000
                t = System.nanoTime() - t0
            } while (t < budgetNs)
            return t.toDouble() / n
        }
        round(2_000_000_000) // warm-up: JIT, JNA's direct-mapping stubs
        val perOp = (1..5).map { round(1_000_000_000) }.sorted()
        println("kotlin  %-48s %8.2f us/op  (min %.2f, max %.2f)".format(name, perOp[2] / 1000, perOp[0] / 1000, perOp[4] / 1000))
    }

    @Test
    fun `allow and record`() {
        val breaker = Breaker(BreakerConfig())
        val clock = ManualClock()
        // The floor: one method call, a Long back, no object made (uniffi clones the handle
        // first, so even this is two crossings).
        measure("clock.reads() (JNA floor)") {
            clock.reads()
        }
        measure("allow() + record(permit, Success), closed") {
            val a = breaker.allow() as Admission.Admitted
            a.permit.use { breaker.record(it, Outcome.Success) }
        }
        measure("acquire() + permit.recordSuccess(), closed") {
            breaker.acquire().use { it.recordSuccess() }
        }
        val policy = Policy(breaker, RetryBudget(BudgetConfig()))
        measure("policy: Call + beforeAttempt + afterAttempt") {
            PolicyCall().use { call ->
                val go = policy.beforeAttempt(call) as Before.Go
                go.permit.use { policy.afterAttempt(call, it, Outcome.Success) }
            }
        }
        val open = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(1)), clock)
        open.acquire().use { it.record(Outcome.Failure) }
        measure("allow() refused, open") {
            open.allow()
        }
        measure("snapshot()") {
            breaker.snapshot()
        }
    }
}
