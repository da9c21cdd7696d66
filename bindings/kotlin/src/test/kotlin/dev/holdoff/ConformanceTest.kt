package dev.holdoff

import org.json.JSONArray
import org.json.JSONObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import java.io.File
import java.time.Instant
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.DurationUnit

/**
 * The Kotlin conformance runner: every case of `conformance/cases` through the public Kotlin API,
 * following the runner contract in `conformance/README.md`, mirroring the Rust reference runner
 * (`core/tests/conformance.rs`). One dynamic test per case, named by its id; a case with
 * `execute` steps runs once per helper flavour it applies to (`execute`, `executeHttp`), each on
 * a fresh build, named `id [execute]` / `id [executeHttp]`. A fleet case builds its `workers`
 * from one configuration on the one manual clock, each breaker with the `fleet` option on the
 * in-process store `memory://<case id>` (reset first), ticked only by `fleet_sync` steps. Every
 * object a case builds has its metrics read once right after it is built (that starts counting).
 *
 * `HOLDOFF_CASES=substring` runs only the cases whose id contains it.
 */
class ConformanceTest {
    private val suiteVersion = 4

    @TestFactory
    fun conformance(): List<DynamicTest> {
        val root = File(System.getProperty("holdoff.cases.dir") ?: "../../conformance")
        assertEquals(suiteVersion, File(root, "VERSION").readText().trim().toInt(), "runner written for suite version $suiteVersion")
        val filter = System.getenv("HOLDOFF_CASES") ?: ""
        val ids = HashSet<String>()
        val tests = caseFiles(File(root, "cases")).flatMap { file ->
            val cases = JSONObject(file.readText()).getJSONArray("cases")
            (0 until cases.length()).map { cases.getJSONObject(it) }.map { case ->
                val id = case.getString("id")
                check(ids.add(id)) { "duplicate case id $id" }
                if (!id.contains(filter)) {
                    emptyList()
                } else {
                    flavours(case).map { flavour ->
                        val name = if (flavour == null) id else "$id [${flavour.helper}]"
                        DynamicTest.dynamicTest(name) { report(name) { runCase(case, flavour) } }
                    }
                }
            }.flatten()
        }
        check(tests.isNotEmpty()) { "no conformance case found under $root" }
        return tests
    }

    // One line per case, like every other runner (run.sh prints the tally after them).
    private fun report(id: String, run: () -> Unit) {
        try {
            run()
            println("ok   $id")
        } catch (e: Throwable) {
            println("FAIL $id: ${e.message ?: e}")
            throw e
        }
    }

    private fun caseFiles(dir: File): List<File> =
        (dir.listFiles() ?: error("no cases directory at $dir")).sortedBy { it.name }.flatMap {
            when {
                it.isDirectory -> caseFiles(it)
                it.name.endsWith(".json") -> listOf(it)
                else -> emptyList()
            }
        }
}

/** Kotlin's retry helpers: the flavours an `execute` step runs through. */
internal enum class Flavour(val helper: String) {
    PLAIN("execute"),
    HTTP("executeHttp"),
}

/**
 * The flavours a case runs in: `null` alone for a case without `execute` steps. A case whose
 * scripts have a `returns` item runs through `execute` only, one with a `response` item through
 * `executeHttp` only (no case has both), any other through both.
 */
private fun flavours(case: JSONObject): List<Flavour?> {
    val steps = case.optJSONArray("steps")?.let { a -> (0 until a.length()).map { a.getJSONObject(it) } } ?: emptyList()
    val executes = steps.filter { it.optString("op") == "execute" }
    if (executes.isEmpty()) return listOf(null)
    val items = executes.flatMap { it.items() }
    val plain = items.any { it.has("returns") }
    val http = items.any { it.has("response") }
    return when {
        plain && http -> fail("case ${case.optString("id")} has both returns and response items: no flavour runs it")
        plain -> listOf(Flavour.PLAIN)
        http -> listOf(Flavour.HTTP)
        else -> Flavour.entries
    }
}

/** An `execute` step's script items. */
internal fun JSONObject.items(): List<JSONObject> {
    val script = optJSONArray("script") ?: fail("execute needs a script")
    return (0 until script.length()).map { script.get(it) as? JSONObject ?: fail("a script item is an object: ${script.get(it)}") }
}

/** A runner error: the case is malformed or the binding misbehaved. */
internal class CaseFailure(message: String) : AssertionError(message)

internal fun fail(message: String): Nothing = throw CaseFailure(message)

// ---------------------------------------------------------------------------------------------
// Configuration: the neutral JSON format converted to the Kotlin constructors and units
// ---------------------------------------------------------------------------------------------

internal fun JSONObject.only(where: String, vararg keys: String) {
    for (k in keySet()) if (k !in keys) fail("unknown key $where.$k")
}

internal fun number(v: Any): Double = when (v) {
    is Number -> v.toDouble()
    "NaN" -> Double.NaN
    "Infinity" -> Double.POSITIVE_INFINITY
    "-Infinity" -> Double.NEGATIVE_INFINITY
    else -> fail("expected a number, got $v")
}

/**
 * A duration field (JSON milliseconds) as a Kotlin Duration. Kotlin's Duration holds negative and
 * infinite values, which reach the core and are refused there naming the field; it cannot hold
 * NaN, so a NaN is refused by the core's units check (durationFromMillis) under the same name.
 */
internal fun duration(field: String, v: Any): Duration {
    val ms = number(v)
    return if (ms.isNaN()) durationFromMillis(field, ms) else ms.milliseconds
}

private fun JSONObject.dur(key: String, field: String): Duration? =
    if (has(key)) duration(field, get(key)) else null

private fun JSONObject.num(key: String): Double? = if (has(key)) number(get(key)) else null

private fun JSONObject.long(key: String): Long? = if (has(key)) (get(key) as? Number)?.toLong() ?: fail("$key must be an integer") else null

private fun JSONObject.ints(key: String): List<Int>? =
    optJSONArray(key)?.let { a -> (0 until a.length()).map { a.getInt(it) } }

private fun backoff(o: JSONObject, field: String): BackoffConfig {
    o.only(field, "initial_ms", "multiplier", "max_ms", "jitter")
    return BackoffConfig(
        initial = o.dur("initial_ms", "$field.initial"),
        multiplier = o.num("multiplier"),
        max = o.dur("max_ms", "$field.max"),
        jitter = o.num("jitter"),
    )
}

private fun trip(o: JSONObject): TripPolicy = when (val p = o.getString("policy")) {
    "consecutive" -> {
        o.only("breaker.trip", "policy", "threshold")
        TripPolicy.Consecutive(o.getLong("threshold"))
    }
    "window" -> {
        o.only("breaker.trip", "policy", "threshold", "window_ms")
        TripPolicy.Window(o.getLong("threshold"), duration("breaker.trip.window", o.get("window_ms")))
    }
    "rate" -> {
        o.only("breaker.trip", "policy", "threshold", "min_calls", "window_ms", "buckets")
        TripPolicy.Rate(
            threshold = number(o.get("threshold")),
            minCalls = o.getLong("min_calls"),
            window = duration("breaker.trip.window", o.get("window_ms")),
            buckets = o.long("buckets"),
        )
    }
    else -> fail("unknown trip policy $p")
}

private fun breakerConfig(o: JSONObject): BreakerConfig {
    o.only("breaker", "trip", "open_interval", "recoveries", "max_probes_in_flight", "probe_timeout_ms", "max_retry_later_ms", "seed")
    return BreakerConfig(
        trip = o.optJSONObject("trip")?.let(::trip),
        openInterval = o.optJSONObject("open_interval")?.let { backoff(it, "breaker.open_interval") },
        recoveries = o.long("recoveries"),
        maxProbesInFlight = o.long("max_probes_in_flight"),
        probeTimeout = o.dur("probe_timeout_ms", "breaker.probe_timeout"),
        maxRetryLater = o.dur("max_retry_later_ms", "breaker.max_retry_later"),
        seed = o.long("seed"),
    )
}

private fun budgetConfig(o: JSONObject): BudgetConfig {
    o.only("budget", "max_rate_limit_duration_ms", "retry_after_cap_ms", "max_retries", "backoff", "max_backoff_duration_ms", "give_up_above_cap", "seed")
    return BudgetConfig(
        maxRateLimitDuration = o.dur("max_rate_limit_duration_ms", "budget.max_rate_limit_duration"),
        retryAfterCap = o.dur("retry_after_cap_ms", "budget.retry_after_cap"),
        maxRetries = o.long("max_retries"),
        backoff = o.optJSONObject("backoff")?.let { backoff(it, "budget.backoff") },
        maxBackoffDuration = o.dur("max_backoff_duration_ms", "budget.max_backoff_duration"),
        giveUpAboveCap = if (o.has("give_up_above_cap")) o.getBoolean("give_up_above_cap") else null,
        seed = o.long("seed"),
    )
}

/** `config.execute`: an absent limit takes the core's default, `null` is no limit. */
private fun executionConfig(o: JSONObject): ExecutionConfig {
    o.only("execute", "attempt_timeout_ms", "total_timeout_ms")
    val defaults = defaultExecutionConfig()
    fun limit(key: String, field: String, default: Duration?): Duration? = when {
        !o.has(key) -> default
        o.isNull(key) -> null
        else -> duration(field, o.get(key))
    }
    return ExecutionConfig(
        attemptTimeout = limit("attempt_timeout_ms", "execute.attempt_timeout", defaults.attemptTimeout),
        totalTimeout = limit("total_timeout_ms", "execute.total_timeout", defaults.totalTimeout),
    )
}

private fun quotaConfig(o: JSONObject): QuotaConfig {
    o.only("quota", "capacity", "retry_cost", "timeout_cost", "success_refill")
    return QuotaConfig(o.long("capacity"), o.long("retry_cost"), o.long("timeout_cost"), o.long("success_refill"))
}

private fun classifierConfig(o: JSONObject): ClassifierConfig {
    o.only("classifier", "failure_statuses", "answer_statuses", "retry_after_statuses", "rate_limit_default_wait_ms")
    return ClassifierConfig(
        failureStatuses = o.ints("failure_statuses"),
        answerStatuses = o.ints("answer_statuses"),
        retryAfterStatuses = o.ints("retry_after_statuses"),
        rateLimitDefaultWait = o.dur("rate_limit_default_wait_ms", "classifier.rate_limit_default_wait"),
    )
}

// ---------------------------------------------------------------------------------------------
// Values as the suite spells them
// ---------------------------------------------------------------------------------------------

internal fun ms(d: Duration): Double = d.toDouble(DurationUnit.MILLISECONDS)

internal fun ms(d: Duration?): Double? = d?.let(::ms)

/** The outcomes without data, found by the core's stable names (`Outcome.stableName()`). */
private val namedOutcomes = listOf(Outcome.Success, Outcome.Answer, Outcome.Failure, Outcome.Timeout, Outcome.Cancelled)

internal fun outcome(v: Any?): Outcome = when (v) {
    is String -> namedOutcomes.firstOrNull { it.stableName() == v } ?: fail("unknown outcome $v")
    is JSONObject -> {
        v.only("outcome", "retry_later_ms")
        Outcome.RetryLater(duration("outcome.retry_later", v.get("retry_later_ms")))
    }
    else -> fail("unknown outcome $v")
}

private fun decision(d: Decision): MutableMap<String, Any?> = when (d) {
    Decision.Done -> mutableMapOf("decision" to d.stableName())
    is Decision.Retry -> mutableMapOf(
        "decision" to d.stableName(),
        "delay_ms" to ms(d.delay),
        "source" to d.source.stableName(),
        "server_delay_ms" to ms(d.serverDelay),
        "capped" to d.capped,
    )
    is Decision.GiveUp -> mutableMapOf(
        "decision" to d.stableName(),
        "reason" to d.reason.stableName(),
        "server_delay_ms" to ms(d.serverDelay),
    )
}

private fun event(e: StateChange): Map<String, Any?> = mapOf(
    "at" to e.at.inWholeMilliseconds,
    "from" to e.from.stableName(),
    "to" to e.to.stableName(),
    "episode" to e.episode,
    "reason" to e.reason.stableName(),
    "requested_delay_ms" to ms(e.requestedDelay),
    "open_for_ms" to ms(e.openFor),
)

private fun retryAfter(r: RetryAfter, into: MutableMap<String, Any?>) {
    when (r) {
        is RetryAfter.Delay -> into["delay_ms"] = ms(r.delay)
        is RetryAfter.Unusable -> into["unusable"] = r.reason.stableName()
    }
}

internal fun same(want: Any?, got: Any?): Boolean = when {
    want == null || want == JSONObject.NULL -> got == null
    want is Number && got is Number -> want.toDouble() == got.toDouble()
    want is JSONArray && got is List<*> -> want.length() == got.size && got.indices.all { same(want.get(it), got[it]) }
    else -> want == got
}

/** Compares [expect] with [actual]; [known] lists every key the op may assert. */
internal fun check(expect: Any?, actual: Map<String, Any?>, vararg known: String) {
    if (expect == null) return
    val obj = expect as? JSONObject ?: fail("expect must be an object")
    for (k in obj.keySet()) {
        if (k !in known) fail("unknown expect key \"$k\"")
        val want = obj.get(k)
        val got = actual[k]
        if (!same(want, got)) fail("$k: expected $want, got $got  (all: $actual)")
    }
}

private val DECISION_KEYS = arrayOf("decision", "delay_ms", "source", "server_delay_ms", "capped", "reason")

/**
 * A step's `status` as the `Int` the API takes. Every integer the suite uses fits one, and every
 * `Int` reaches the core's check; a wider value could not be passed to the API at all.
 */
internal fun JSONObject.status(): Int {
    val v = opt("status") as? Number ?: fail("status must be an integer")
    val n = v.toLong()
    if (n.toDouble() != v.toDouble() || n !in Int.MIN_VALUE..Int.MAX_VALUE) fail("status $v does not fit the API's Int")
    return n.toInt()
}

// ---------------------------------------------------------------------------------------------
// One case
// ---------------------------------------------------------------------------------------------

/**
 * One worker's objects, built from the case's configuration on the case's clock: a breaker (or a
 * group), budget, quota, classifier and policy. A fleet case has `workers` of them, each breaker
 * attached to `config.fleet` (the same store and key).
 */
private class Worker(case: JSONObject, config: JSONObject, clock: ManualClock, fleet: FleetConfig?) : AutoCloseable {
    val breaker: Breaker?
    val group: BreakerGroup?
    val budget: RetryBudget?
    val quota: RetryQuota?
    val classifier: Classifier
    val policy: Policy?

    init {
        val isGroup = case.optBoolean("group", false)
        val breakerSpec = config.optJSONObject("breaker")?.let(::breakerConfig)
        breaker = if (breakerSpec != null && !isGroup) Breaker(breakerSpec, clock, fleet) else null
        group = if (breakerSpec != null && isGroup) {
            val bound = config.optJSONObject("group")?.also { it.only("group", "max_keys") }
            BreakerGroup(breakerSpec, clock, maxKeys = bound?.long("max_keys"), fleet = fleet)
        } else {
            null
        }
        budget = config.optJSONObject("budget")?.let { RetryBudget(budgetConfig(it), clock) }
        quota = config.optJSONObject("quota")?.let { RetryQuota(quotaConfig(it)) }
        classifier = Classifier(config.optJSONObject("classifier")?.let(::classifierConfig), clock)
        policy = if (case.optBoolean("policy", false)) {
            Policy(breaker ?: fail("a policy case needs a breaker"), budget ?: fail("a policy case needs a budget"), quota, classifier)
        } else {
            null
        }
        // Counting starts at an object's first read of its metrics: read each once now, so the
        // `metrics` steps count the whole case.
        listOfNotNull(breaker?.metrics(), group?.metrics(), quota?.metrics(), policy?.metrics())
    }

    /** Frees the native objects now: a breaker's fleet goes with the last reference to it. */
    override fun close() {
        listOfNotNull(policy, breaker, group, budget, quota, classifier).forEach { it.close() }
    }
}

/** `config.fleet` as the Kotlin option; durations through the same conversion as the rest. */
private fun fleetConfig(o: JSONObject): FleetConfig {
    o.only("fleet", "url", "key", "refresh_ms", "fallback_after_ms", "timeout_ms", "ttl_ms")
    // A missing url or key reaches the core as an empty string, which it refuses naming the field.
    return FleetConfig(
        url = o.optString("url", ""),
        key = o.optString("key", ""),
        refresh = o.dur("refresh_ms", "fleet.refresh"),
        fallbackAfter = o.dur("fallback_after_ms", "fleet.fallback_after"),
        timeout = o.dur("timeout_ms", "fleet.timeout"),
        ttl = o.dur("ttl_ms", "fleet.ttl"),
    )
}

private const val MEMORY = "memory://"

private class Ctx(case: JSONObject, val flavour: Flavour?) : AutoCloseable {
    val config: JSONObject = case.optJSONObject("config") ?: JSONObject()
    val clock: ManualClock
    val fleet: FleetConfig? = config.optJSONObject("fleet")?.let(::fleetConfig)
    val workers = ArrayList<Worker>()
    // Each permit with the breaker object that admitted it: it is recorded there, as user code
    // does, not on whatever the group holds for its key by then.
    val permits = HashMap<String, Pair<Permit, Breaker>>()
    val calls = HashMap<String, RetryState>()
    val policyCalls = HashMap<String, PolicyCall>()
    val leases = HashMap<String, QuotaLease>()
    val limits: ExecutionConfig = config.optJSONObject("execute")?.let(::executionConfig) ?: defaultExecutionConfig()

    init {
        config.only("config", "breaker", "budget", "quota", "classifier", "group", "execute", "fleet")
        val origin = case.optJSONObject("clock")?.optLong("wall_origin_unix_ms", 0) ?: 0
        clock = ManualClock.withWallOrigin(Instant.ofEpochMilli(origin))
        // Every case starts from an empty, reachable store.
        fleet?.url?.takeIf { it.startsWith(MEMORY) }?.let { memoryStoreReset(it.removePrefix(MEMORY)) }
        val n = case.optInt("workers", 1)
        if (n < 1) fail("workers must be >= 1")
        try {
            repeat(n) { workers += Worker(case, config, clock, fleet) }
            // The helpers check their limits when a call starts; building the case checks them now.
            workers[0].policy?.let { if (config.has("execute")) Execution(it, limits).close() }
        } catch (e: Throwable) {
            close()
            throw e
        }
    }

    override fun close() = workers.forEach { it.close() }

    /** The step's worker (`worker`, default 0). */
    fun worker(step: JSONObject): Worker {
        val i = step.optInt("worker", 0)
        return workers.getOrNull(i) ?: fail("no worker $i (the case has ${workers.size})")
    }

    /** The step's breaker: the worker's, or its group's for the step's `key` (asked once). */
    fun breaker(step: JSONObject): Breaker {
        val w = worker(step)
        return when (val key = step.optString("key", "")) {
            "" -> w.breaker ?: fail("the case has no breaker")
            else -> (w.group ?: fail("step names a key but the case has no group")).get(key)
        }
    }

    fun budget(step: JSONObject): RetryBudget = worker(step).budget ?: fail("the case has no budget")

    fun quota(step: JSONObject): RetryQuota = worker(step).quota ?: fail("the case has no quota")

    fun policy(step: JSONObject): Policy = worker(step).policy ?: fail("the case has no policy")

    /** `fleet_sync`: the named worker's tick, or every worker's in order, each compared. */
    fun fleetSync(step: JSONObject, expect: Any?) {
        val which = if (step.has("worker")) listOf(worker(step)) else workers
        for (w in which) {
            val b = w.breaker ?: fail("the case has no breaker")
            val r = b.syncFleet() ?: fail("the breaker has no fleet")
            val rec = r.record.takeIf { r.ok }
            val a = mapOf(
                "ok" to r.ok,
                "attached" to r.attached,
                "granted" to r.granted,
                "fleet_state" to rec?.state?.stableName(),
                "fleet_episode" to rec?.episode,
                "fleet_recoveries" to rec?.recoveries,
            )
            try {
                check(expect, a, *a.keys.toTypedArray())
            } catch (e: CaseFailure) {
                fail("worker ${workers.indexOf(w)}: ${e.message}")
            }
        }
    }

    /**
     * `metrics`: the readings of the step's `of` (the breaker, in a policy case the policy's; the
     * policy's retry series; the quota; the group with its breakers), each written as `name` or
     * `name{k=v,...}` (keys sorted), zeros dropped; they must equal `expect.series` exactly.
     */
    fun metrics(step: JSONObject, expect: Any?) {
        val w = worker(step)
        val readings = when (val of = step.optString("of")) {
            "breaker" -> (w.policy?.breaker() ?: w.breaker ?: fail("the case has no breaker")).metrics()
            "policy" -> (w.policy ?: fail("the case has no policy")).metrics()
            "quota" -> (w.quota ?: fail("the case has no quota")).metrics()
            "group" -> (w.group ?: fail("the case has no group")).metrics()
            else -> fail("metrics of \"$of\": breaker, policy, quota or group")
        }
        val got = readings.filter { it.value != 0.0 }.associate { r ->
            val attrs = r.attributes.entries.sortedBy { it.key }.joinToString(",") { "${it.key}=${it.value}" }
            (if (attrs.isEmpty()) r.name else "${r.name}{$attrs}") to r.value
        }
        if (expect == null) return
        val obj = expect as? JSONObject ?: fail("expect must be an object")
        obj.only("expect", "series")
        val want = obj.optJSONObject("series") ?: return
        val errors = want.keySet().sorted().mapNotNull { k ->
            val v = number(want.get(k))
            val g = got[k]
            if (g != null && Math.abs(g - v) <= 1e-9) null else "$k: expected $v, got ${g ?: 0}"
        } + got.keys.filter { !want.has(it) }.sorted().map { "$it: expected 0, got ${got[it]}" }
        if (errors.isNotEmpty()) fail("metrics of ${step.optString("of")}: ${errors.joinToString("; ")}")
    }

    /** `fleet_store`: `down`, `up` or `flush` on the case's in-process store. */
    fun fleetStore(step: JSONObject, expect: Any?) {
        val url = fleet?.url ?: fail("the case has no fleet")
        if (!url.startsWith(MEMORY)) fail("fleet_store needs a memory:// fleet, not $url")
        memoryStoreControl(url.removePrefix(MEMORY), step.optString("action", "").ifEmpty { fail("fleet_store needs action") })
        check(expect, emptyMap())
    }

    fun headers(step: JSONObject): List<Header> {
        val list = step.optJSONArray("headers") ?: return emptyList()
        return (0 until list.length()).map {
            val pair = list.get(it) as? JSONArray ?: fail("bad header ${list.get(it)}")
            if (pair.length() != 2) fail("bad header $pair")
            Header(pair.getString(0), pair.getString(1))
        }
    }

    fun allow(b: Breaker, step: JSONObject, a: MutableMap<String, Any?>): Boolean =
        when (val adm = b.allow()) {
            is Admission.Admitted -> {
                a["admitted"] = true
                a["episode"] = adm.episode
                a["probe"] = adm.probe
                permits[step.optString("as", "_last")] = adm.permit to b
                true
            }
            is Admission.Refused -> {
                a["admitted"] = false
                a["retry_after_ms"] = ms(adm.retryAfter)
                a["state"] = adm.state.stableName()
                false
            }
        }

    fun record(name: String, o: Outcome, a: MutableMap<String, Any?>) {
        val (permit, b) = permits[name] ?: fail("no permit named \"$name\"")
        try {
            a["effect"] = b.record(permit, o).stableName()
        } catch (e: HoldoffException) {
            a["error"] = e.code()
        }
    }

    fun step(step: JSONObject) {
        val op = step.optString("op", "").ifEmpty { fail("step without op") }
        val expect = step.opt("expect")
        val a = HashMap<String, Any?>()
        val callName = step.optString("call", "default")
        when (op) {
            "allow" -> {
                allow(breaker(step), step, a)
                check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state")
            }
            "record" -> {
                val name = step.optString("permit", "").ifEmpty { fail("record needs permit") }
                record(name, outcome(step.opt("outcome")), a)
                check(expect, a, "effect", "error")
            }
            "call" -> {
                val o = outcome(step.opt("outcome"))
                if (allow(breaker(step), step, a)) record(step.optString("as", "_last"), o, a)
                check(expect, a, "admitted", "episode", "probe", "retry_after_ms", "state", "effect")
            }
            "record_foreign" -> {
                val name = step.optString("permit", "").ifEmpty { fail("record_foreign needs permit") }
                val (permit, _) = permits[name] ?: fail("no permit named \"$name\"")
                // A second breaker from the same configuration, without the fleet: only its identity matters.
                val other = Breaker(breakerConfig(config.optJSONObject("breaker") ?: fail("no breaker config")), clock)
                try {
                    a["effect"] = other.record(permit, Outcome.Success).stableName()
                } catch (e: HoldoffException) {
                    a["error"] = e.code()
                }
                check(expect, a, "error", "effect")
            }
            "snapshot" -> {
                val s = breaker(step).snapshot()
                a += mapOf(
                    "state" to s.state.stableName(),
                    "episode" to s.episode,
                    "failures" to s.failures,
                    "recoveries" to s.recoveries,
                    "probes_in_flight" to s.probesInFlight,
                    "retry_after_ms" to ms(s.retryAfter),
                    "probe_ready" to s.probeReady,
                    "interval_ms" to ms(s.interval),
                    "opens" to s.opens,
                    "closes" to s.closes,
                    "probes" to s.probes,
                    "refusals" to s.refusals,
                    "stale_answers" to s.staleAnswers,
                )
                check(expect, a, *a.keys.toTypedArray())
            }
            "events" -> {
                val got = breaker(step).drainEvents().map(::event)
                val want = expect as? JSONArray ?: fail("events expects an array")
                if (want.length() != got.size) fail("expected ${want.length()} events, got ${got.size}: $got")
                got.forEachIndexed { i, g ->
                    try {
                        check(want.get(i), g, *g.keys.toTypedArray())
                    } catch (e: CaseFailure) {
                        fail("event $i: ${e.message}")
                    }
                }
            }
            "force_open" -> { breaker(step).forceOpen(); check(expect, a) }
            "disable" -> { breaker(step).disable(); check(expect, a) }
            "reset" -> { breaker(step).reset(); check(expect, a) }
            "clock_set" -> {
                val to = step.optLong("to_ms", -1).takeIf { it >= 0 } ?: fail("clock_set needs to_ms")
                try {
                    clock.set(to.milliseconds)
                } catch (e: HoldoffException) {
                    a["error"] = e.code()
                }
                check(expect, a, "error")
            }
            "clock_advance" -> {
                val by = step.optLong("by_ms", -1).takeIf { it >= 0 } ?: fail("clock_advance needs by_ms")
                clock.advance(by.milliseconds)
                check(expect, a)
            }
            "decide" -> {
                val o = outcome(step.opt("outcome"))
                val b = budget(step)
                val call = calls.getOrPut(callName) { RetryState() }
                a += decision(b.decide(call, o))
                check(expect, a, *DECISION_KEYS)
            }
            "budget_state" -> {
                val b = budget(step)
                val start = b.episodeStart()
                a["episode_active"] = start != null
                a["episode_start_ms"] = start?.inWholeMilliseconds
                a["retries"] = calls[callName]?.retries() ?: 0L
                check(expect, a, "episode_active", "episode_start_ms", "retries")
            }
            "parse_retry_after" -> {
                val v = step.optString("value", null) ?: fail("parse_retry_after needs value")
                retryAfter(parseRetryAfter(v, clock.wallNow()), a)
                check(expect, a, "delay_ms", "unusable")
            }
            "hint" -> {
                val h = hintFromHeaders(headers(step), clock.wallNow())
                retryAfter(h.hint, a)
                a["source"] = h.source.stableName()
                check(expect, a, "delay_ms", "unusable", "source")
            }
            "classify" -> {
                val status = step.status()
                try {
                    val c = worker(step).classifier.classify(status, headers(step))
                    a["outcome"] = c.outcome.stableName()
                    a["retry_later_ms"] = (c.outcome as? Outcome.RetryLater)?.let { ms(it.delay) }
                } catch (e: HoldoffException) {
                    a["error"] = e.code()
                }
                check(expect, a, "outcome", "retry_later_ms", "error")
            }
            "quota_acquire" -> {
                val q = quota(step)
                when (val r = q.acquire(step.optBoolean("timeout", false))) {
                    is QuotaAcquisition.Acquired -> {
                        a["acquired"] = true
                        a["cost"] = r.lease.cost()
                        step.optString("as", "").ifEmpty { null }?.let { leases[it] = r.lease }
                    }
                    is QuotaAcquisition.Empty -> {
                        a["acquired"] = false
                        a["cost"] = r.cost
                    }
                }
                a["available"] = q.available()
                check(expect, a, "acquired", "cost", "available")
            }
            "quota_success" -> {
                val q = quota(step)
                val lease = step.optString("lease", "").ifEmpty { null }?.let { leases[it] ?: fail("no lease named \"$it\"") }
                // A second quota built from the same configuration: the lease is not its own.
                val to = if (step.optBoolean("foreign", false)) RetryQuota(quotaConfig(config.getJSONObject("quota"))) else q
                try {
                    to.onSuccess(lease)
                } catch (e: HoldoffException) {
                    a["error"] = e.code()
                }
                a["available"] = q.available()
                check(expect, a, "available", "error")
            }
            "group_snapshot" -> {
                val g = worker(step).group ?: fail("the case has no group")
                val s = g.snapshot()
                a["keys"] = g.keys()
                a["max_keys"] = s.maxKeys
                a["evictions"] = s.evictions
                a["overflows"] = s.overflows
                check(expect, a, "keys", "max_keys", "evictions", "overflows")
            }
            "before" -> {
                val p = policy(step)
                val call = policyCalls.getOrPut(callName) { PolicyCall() }
                val b = p.beforeAttempt(call)
                a["action"] = b.stableName()
                when (b) {
                    is Before.Go -> {
                        a["episode"] = b.episode
                        a["probe"] = b.probe
                        permits[step.optString("as", "_last")] = b.permit to p.breaker()
                    }
                    is Before.Wait -> {
                        a["delay_ms"] = ms(b.delay)
                    }
                    is Before.GiveUp -> {
                        a["reason"] = b.reason.stableName()
                        a["retry_after_ms"] = ms(b.retryAfter)
                    }
                }
                check(expect, a, "action", "episode", "probe", "delay_ms", "reason", "retry_after_ms")
            }
            "after" -> {
                val p = policy(step)
                val name = step.optString("permit", "_last")
                val (permit, _) = permits[name] ?: fail("no permit named \"$name\"")
                val call = policyCalls.getOrPut(callName) { PolicyCall() }
                try {
                    if (step.has("status")) {
                        val r = p.afterResponse(call, permit, step.status(), headers(step))
                        a += decision(r.decision)
                        a["outcome"] = r.classification.outcome.stableName()
                    } else {
                        a += decision(p.afterAttempt(call, permit, outcome(step.opt("outcome") ?: fail("after needs outcome or status"))))
                    }
                } catch (e: HoldoffException) {
                    a["error"] = e.code()
                }
                check(expect, a, *DECISION_KEYS, "error", "outcome")
            }
            "execute" -> {
                val p = policy(step)
                val got = runExecute(p, clock, limits, flavour ?: fail("an execute step outside a flavour"), step, ::headers)
                checkExecute(expect, got)
            }
            "metrics" -> metrics(step, expect)
            "fleet_sync" -> fleetSync(step, expect)
            "fleet_store" -> fleetStore(step, expect)
            else -> fail("unknown op \"$op\"")
        }
    }
}

private fun runCase(case: JSONObject, flavour: Flavour?) {
    val expectError = case.optJSONObject("expect_error")
    val ctx = try {
        Ctx(case, flavour)
    } catch (e: HoldoffException) {
        if (expectError == null) fail("configuration refused: $e")
        val a = mutableMapOf<String, Any?>("error" to e.code())
        if (e is InvalidConfigException) a["field"] = e.field
        check(expectError, a, "error", "field")
        return
    }
    ctx.use {
        if (expectError != null) fail("expected configuration error $expectError, but it built")
        runSteps(ctx, case.optJSONArray("steps") ?: fail("case without steps"))
    }
}

private fun runSteps(ctx: Ctx, steps: JSONArray) {
    for (i in 0 until steps.length()) {
        val step = steps.getJSONObject(i)
        val repeat = step.optLong("repeat", 1)
        val every = step.optLong("every_ms", 0)
        for (r in 0 until repeat) {
            if (step.has("at")) {
                val t = step.getLong("at") + r * every
                try {
                    ctx.clock.set(t.milliseconds)
                } catch (e: HoldoffException) {
                    fail("step $i: clock cannot move to $t: $e")
                }
            }
            try {
                ctx.step(step)
            } catch (e: CaseFailure) {
                val rep = if (repeat > 1) " (repetition $r)" else ""
                fail("step $i ${step.optString("op", "?")} at ${ctx.clock.now().inWholeMilliseconds}$rep: ${e.message}")
            }
        }
    }
}
