// The Kotlin worker of the multi-process fleet test (the contract: conformance/fleet/README.md).
// run.sh starts it through conformance/fleet/run.py as `java -cp <test classpath>
// dev.holdoff.FleetWorker`; it is no JUnit test.
@file:JvmName("FleetWorker")

package dev.holdoff

import org.json.JSONObject
import java.io.File
import java.io.IOException
import java.lang.management.ManagementFactory
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse.BodyHandlers
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource

private class FleetReport(val worker: String) {
    var callsStarted = 0L
    var callsEnded = 0L
    var allowed = 0L
    var refused = 0L
    var errors = 0L
    val statuses = HashMap<String, Long>()
    var slowestBreakerCallMs = 0.0
    val refusalStarts = ArrayList<Double>()

    /** Runs [block], a breaker call, keeping the longest such call. */
    fun <T> timed(block: () -> T): T {
        val mark = TimeSource.Monotonic.markNow()
        try {
            return block()
        } finally {
            val ms = mark.elapsedNow().toDouble(kotlin.time.DurationUnit.MILLISECONDS)
            // Diagnostics for a failed run: was it the collector or the machine?
            if (ms > 20) log(worker, "a breaker call took $ms ms (garbage collection so far: ${gcMillis()} ms)")
            slowestBreakerCallMs = maxOf(slowestBreakerCallMs, ms)
        }
    }

    fun json(): JSONObject = JSONObject()
        .put("worker", worker)
        .put("calls_started", callsStarted)
        .put("calls_ended", callsEnded)
        .put("allowed", allowed)
        .put("refused", refused)
        .put("errors", errors)
        .put("statuses", JSONObject(statuses as Map<*, *>))
        .put("slowest_breaker_call_ms", slowestBreakerCallMs)
        .put("refusal_starts", refusalStarts)
}

private class FleetLoop(env: Map<String, String>) {
    val id = env.getValue("WORKER_ID")
    val report = FleetReport(id)
    val breaker = Breaker(
        BreakerConfig(
            trip = TripPolicy.Consecutive(1),
            openInterval = BackoffConfig(initial = 500.milliseconds, multiplier = 1.0, max = 500.milliseconds),
            recoveries = 2,
            maxProbesInFlight = 1,
        ),
        fleet = FleetConfig(url = env.getValue("HOLDOFF_FLEET_URL"), key = env.getValue("HOLDOFF_FLEET_KEY"), refresh = 20.milliseconds),
    )
    val client: HttpClient = HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(java.time.Duration.ofSeconds(2))
        .build()
    val request: HttpRequest = HttpRequest.newBuilder(URI.create(env.getValue("UPSTREAM_URL") + "/call"))
        .header("X-Worker-Id", id)
        .timeout(java.time.Duration.ofSeconds(2))
        .build()

    /** One call; true if the breaker refused it. */
    fun call(wasRefused: Boolean): Boolean {
        val permit = when (val a = report.timed { breaker.allow() }) {
            is Admission.Refused -> {
                report.refused++
                // Epoch time: the driver compares it with the upstream's, another process's.
                if (!wasRefused) report.refusalStarts += System.currentTimeMillis().toDouble()
                return true
            }
            is Admission.Admitted -> a.permit
        }
        report.allowed++
        permit.use {
            val response = try {
                client.send(request, BodyHandlers.discarding())
            } catch (e: IOException) { // a transport error or timeout: a failure
                log(id, e.toString())
                report.errors++
                report.timed { it.record(Outcome.Failure) }
                return false
            }
            val status = response.statusCode()
            report.statuses.merge(status.toString(), 1L) { a, b -> a + b }
            val outcome = when (status) {
                200 -> Outcome.Success
                429 -> Outcome.RetryLater((response.headers().firstValue("Retry-After").orElse(null)?.toLongOrNull() ?: 1L).seconds)
                else -> Outcome.Failure
            }
            report.timed { it.record(outcome) }
            if (status == 200) Thread.sleep(10)
        }
        return false
    }
}

/**
 * Loads the classes and the native paths of `allow` and `record` on a local breaker first, so the
 * timed calls measure the breaker, not the JVM's first use of each class.
 */
private fun warmUp() {
    val outcomes = listOf(Outcome.Success, Outcome.Failure, Outcome.RetryLater(1.seconds))
    Breaker(BreakerConfig()).use { b ->
        repeat(300) { i ->
            when (val a = b.allow()) {
                is Admission.Admitted -> a.permit.use { it.record(outcomes[i % outcomes.size]) }
                is Admission.Refused -> b.reset()
            }
        }
    }
}

private fun gcMillis(): Long = ManagementFactory.getGarbageCollectorMXBeans().sumOf { it.collectionTime }

private fun log(id: String, what: String) = System.err.println("worker $id: ${System.currentTimeMillis()} $what")

fun main() {
    val env = System.getenv()
    val end = TimeSource.Monotonic.markNow() + env.getValue("RUN_MS").toLong().milliseconds
    warmUp()
    val worker = FleetLoop(env)
    log(worker.id, "running")
    var refused = false
    while (end.hasNotPassedNow()) {
        worker.report.callsStarted++
        refused = try {
            worker.call(refused)
        } catch (e: Exception) { // counted; the loop goes on: every call must end
            log(worker.id, e.toString())
            worker.report.errors++
            false
        }
        worker.report.callsEnded++
        if (refused) Thread.sleep(5)
    }
    // Closing the breaker closes its fleet: the background threads joined, the sockets closed.
    log(worker.id, "closing")
    worker.breaker.close()
    File(env.getValue("OUT")).writeText(worker.report.json().toString())
    log(worker.id, "done")
}
