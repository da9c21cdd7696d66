package dev.holdoff

import com.sun.jna.Native
import com.sun.jna.Structure
import io.github.resilience4j.circuitbreaker.CircuitBreaker
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Tag
import org.junit.jupiter.api.Test
import java.io.File
import java.util.concurrent.CyclicBarrier
import java.util.concurrent.TimeUnit
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.minutes

/**
 * The Kotlin benchmark (run by `bench/kotlin/run.sh`, excluded from the binding's `test`): holdoff
 * through its fast path next to Resilience4j's CircuitBreaker, in one JVM.
 *
 * Each sample is one timed batch sized to about 100 ms (ns/op = batch wall time / batch size),
 * 5 samples after a warm-up of about 2 s per operation (the JIT). Prints a summary; with
 * HOLDOFF_BENCH_OUT=<file> it also appends one JSON line per (subject, op), the cross-language
 * benchmark's record format.
 *
 * Floors: the first is the crossing holdoff's refusals and probes pay (a no-op JNI call into the
 * library), the one the report compares with; the second a no-op JNA direct-mapped call, what
 * every generated uniffi call pays at least.
 *
 * Memory: retained Java heap (used heap after full collections) plus native bytes (glibc
 * mallinfo2: the Rust library allocates with malloc) before and after creating 10,000 breakers,
 * divided by 10,000.
 */
@Tag("bench")
class BenchTest {
    private val out: File? = System.getenv("HOLDOFF_BENCH_OUT")?.takeIf { it.isNotEmpty() }?.let(::File)
    private val batchNs = (System.getenv("HOLDOFF_BENCH_BATCH_MS")?.toLongOrNull() ?: 100L) * 1_000_000
    private val samples = maxOf(5, System.getenv("HOLDOFF_BENCH_REPS")?.toIntOrNull() ?: 5)

    /** A call into the native library that does nothing but return a constant: uniffi's contract version, through JNA direct mapping as every generated call is (the JNI floor is DirectJni.version()). */
    private object NoopLib {
        external fun ffi_holdoff_uniffi_uniffi_contract_version(): Int

        init {
            Native.register(NoopLib::class.java, "holdoff_uniffi")
        }
    }

    @Structure.FieldOrder("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    open class MallInfo2 : Structure() {
        @JvmField var arena: Long = 0
        @JvmField var ordblks: Long = 0
        @JvmField var smblks: Long = 0
        @JvmField var hblks: Long = 0
        @JvmField var hblkhd: Long = 0
        @JvmField var usmblks: Long = 0
        @JvmField var fsmblks: Long = 0
        @JvmField var uordblks: Long = 0
        @JvmField var fordblks: Long = 0
        @JvmField var keepcost: Long = 0

        class ByValue : MallInfo2(), Structure.ByValue
    }

    private object LibC {
        external fun mallinfo2(): MallInfo2.ByValue

        init {
            Native.register(LibC::class.java, "c")
        }
    }

    private fun nativeBytes(): Long = LibC.mallinfo2().let { it.uordblks + it.hblkhd }

    private fun heapBytes(): Long {
        val rt = Runtime.getRuntime()
        // Breakers of an earlier sample are freed by the Cleaner's thread after a collection:
        // give it time, so that their memory is not taken off this sample.
        repeat(3) {
            System.gc()
            Thread.sleep(100)
        }
        return rt.totalMemory() - rt.freeMemory()
    }

    private fun json(s: String) = "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""

    private fun emit(subject: String, op: String, unit: String, s: DoubleArray, note: String) {
        val sorted = s.sorted()
        println("kotlin %-16s %-18s %10.1f %-6s (min %.1f, max %.1f)  %s".format(subject, op, sorted[s.size / 2], unit, sorted[0], sorted.last(), note))
        val f = out ?: return
        val line = "{\"lang\": \"kotlin\", \"subject\": ${json(subject)}, \"op\": ${json(op)}, \"unit\": ${json(unit)}, " +
            "\"samples\": [${s.joinToString(", ") { it.toString() }}], \"note\": ${json(note)}}\n"
        synchronized(BenchTest::class.java) { f.appendText(line) }
    }

    /** Wall ns of [threads] threads each running [batch] with n operations, divided by n. */
    private fun timed(threads: Int, n: Int, batch: (Int) -> Unit): Double {
        if (threads == 1) {
            val t0 = System.nanoTime()
            batch(n)
            return (System.nanoTime() - t0).toDouble() / n
        }
        val start = CyclicBarrier(threads + 1)
        val ts = (0 until threads).map { Thread { start.await(); batch(n) }.apply { start() } }
        start.await()
        val t0 = System.nanoTime()
        ts.forEach { it.join() }
        return (System.nanoTime() - t0).toDouble() / n
    }

    private fun measure(subject: String, op: String, note: String, threads: Int = 1, batch: (Int) -> Unit) {
        var n = 1000
        var per = timed(threads, n, batch)
        // Warm-up: about 2 s of batches (the JIT compiles the loop), then size the batch.
        val warmEnd = System.nanoTime() + 2_000_000_000L
        while (System.nanoTime() < warmEnd) {
            if (per * n < batchNs / 10) n *= 4
            per = timed(threads, n, batch)
        }
        n = (batchNs / per).toInt().coerceAtLeast(1)
        emit(subject, op, "ns/op", DoubleArray(samples) { timed(threads, n, batch) }, note)
    }

    private fun memory(subject: String, note: String, make: () -> Any) {
        val count = 10_000
        val warm = make()
        val s = DoubleArray(samples) {
            val keep = arrayOfNulls<Any>(count)
            val h0 = heapBytes()
            Thread.sleep(100)
            val n0 = nativeBytes()
            for (i in 0 until count) keep[i] = make()
            val h1 = heapBytes()
            val n1 = nativeBytes()
            java.lang.ref.Reference.reachabilityFence(keep)
            ((h1 - h0) + (n1 - n0)).toDouble() / count
        }
        java.lang.ref.Reference.reachabilityFence(warm)
        emit(subject, "bytes_per_breaker", "bytes", s, note)
    }

    // Set by the pom from the version it resolves.
    private val r4jVersion: String = System.getProperty("resilience4j.version") ?: "?"

    @Test
    fun `holdoff against Resilience4j`() {
        val r4j = "resilience4j $r4jVersion, resilience4j-circuitbreaker"
        var sink = 0L

        // The crossing holdoff pays (its refusals and probes call the library through JNI) first:
        // the report takes the first floor record as the language's floor.
        check(DirectJni.bound) { "the library's JNI methods are not bound" }
        measure("floor", "noop_crossing", "DirectJni.version() through JNI (a static native method, no arguments, returns an int): the crossing alone; FastPath's refusals and probes cross this way") { n ->
            for (i in 0 until n) sink += DirectJni.version()
        }
        measure("floor", "noop_crossing_jna", "ffi_holdoff_uniffi_uniffi_contract_version() through JNA direct mapping (no arguments, returns an int): the crossing alone; every generated uniffi call crosses this way (or slower)") { n ->
            for (i in 0 until n) sink += NoopLib.ffi_holdoff_uniffi_uniffi_contract_version()
        }

        val breaker = Breaker(BreakerConfig())
        val fast = breaker.fastPath()
        val cb = CircuitBreaker.of("bench", CircuitBreakerConfig.ofDefaults())
        measure("holdoff", "allow_record", "fast.acquire().recordSuccess() (FastPath: the word read through a VarHandle, no native call), closed, defaults") { n ->
            for (i in 0 until n) fast.acquire().recordSuccess()
        }
        measure("resilience4j", "allow_record", "cb.acquirePermission(); cb.onSuccess(0, NANOSECONDS), closed, defaults ($r4j)") { n ->
            for (i in 0 until n) {
                cb.acquirePermission()
                cb.onSuccess(0, TimeUnit.NANOSECONDS)
            }
        }
        measure("holdoff", "allow_record_2t", "fast.acquire().recordSuccess(), 2 threads on one breaker", threads = 2) { n ->
            for (i in 0 until n) fast.acquire().recordSuccess()
        }
        measure("resilience4j", "allow_record_2t", "cb.acquirePermission(); cb.onSuccess(0, NANOSECONDS), 2 threads on one breaker", threads = 2) { n ->
            for (i in 0 until n) {
                cb.acquirePermission()
                cb.onSuccess(0, TimeUnit.NANOSECONDS)
            }
        }

        // Open for an hour: every admission is refused with the time to the next probe.
        val open = Breaker(BreakerConfig(trip = TripPolicy.Consecutive(1), openInterval = BackoffConfig(initial = 1.hours, max = 1.hours)))
        val openFast = open.fastPath()
        openFast.acquire().record(Outcome.Failure)
        // Open (tripped, waiting for its probe), as Resilience4j's below: not forced open, whose
        // refusal reads no clock.
        val first = openFast.allow()
        check(first is Admission.Refused && first.state == State.OPEN && first.retryAfter!! > 59.minutes) { "not open: $first" }
        measure("holdoff", "refuse_open", "fast.allow() -> Admission.Refused (open, tripped by a failure: the word says so, then one JNI call, DirectJni.allow, for the refusal and its exact time to the probe packed in a long)") { n ->
            for (i in 0 until n) if (openFast.allow() is Admission.Refused) sink++
        }
        val cbOpen = CircuitBreaker.of("open", CircuitBreakerConfig.custom().waitDurationInOpenState(java.time.Duration.ofHours(1)).build())
        cbOpen.transitionToOpenState()
        measure("resilience4j", "refuse_open", "cb.tryAcquirePermission() -> false (open, $r4j)") { n ->
            for (i in 0 until n) if (!cbOpen.tryAcquirePermission()) sink++
        }

        measure("holdoff", "protected_call", "fast.execute { 1 } (suspend, one runBlocking around the batch), closed") { n ->
            runBlocking { for (i in 0 until n) sink += fast.execute { 1 } }
        }
        measure("resilience4j", "protected_call", "cb.executeSupplier { 1 } (reads its clock twice for the duration), closed") { n ->
            for (i in 0 until n) sink += cb.executeSupplier { 1 }
        }

        memory("holdoff", "Breaker(BreakerConfig()): retained Java heap (the object, its Cleaner registration) + native malloc'd bytes (mallinfo2), over 10,000") {
            Breaker(BreakerConfig())
        }
        val defaults = CircuitBreakerConfig.ofDefaults()
        var k = 0
        memory("resilience4j", "CircuitBreaker.of(name, shared default config): retained Java heap, over 10,000 ($r4j)") {
            CircuitBreaker.of("cb" + k++, defaults)
        }
        println("(sink $sink)")
    }
}
