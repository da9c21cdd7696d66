// The Micrometer adapter over the metric model (docs/metrics.md): one meter per series, each
// reading the core's counters when the registry is scraped. Micrometer is an optional dependency:
// nothing else in holdoff refers to this file, so without Micrometer the rest loads as before.

package dev.holdoff

import io.micrometer.core.instrument.FunctionCounter
import io.micrometer.core.instrument.Gauge
import io.micrometer.core.instrument.Meter
import io.micrometer.core.instrument.MeterRegistry
import io.micrometer.core.instrument.Tag
import io.micrometer.core.instrument.binder.MeterBinder
import java.util.concurrent.CopyOnWriteArrayList

/**
 * Binds holdoff's metrics (docs/metrics.md) to a Micrometer registry:
 * `HoldoffMetrics(breaker, upstream = "payments").bindTo(registry)`.
 *
 * One meter per series: a `FunctionCounter` for each counter and a `Gauge` for each gauge of the
 * core's table ([metricTable]), named as the table names them (`holdoff.breaker.refused`; a
 * Prometheus registry writes `holdoff_breaker_refused_total`), tagged with the series' attribute
 * (`state`, `outcome`, `reason`, `source`) and `upstream`. Durations are seconds (base unit
 * `seconds`, so Prometheus adds `_seconds`); the table's other units are counts and carry no base
 * unit (Micrometer would append them to the name).
 *
 * Values are read when the registry reads its meters (a scrape, a publish), never on a call: one
 * read of the target serves every meter of that scrape (a meter read a second time starts the
 * next read). [bindTo] reads the target once, which starts its counting (the core counts from an
 * object's first read); calls made before that are not counted.
 *
 * A target is a [Breaker], a [Policy] (its retry series, its breaker's and its quota's), a
 * [RetryQuota] or a [BreakerGroup]. [upstream] names the upstream of a breaker, policy or quota
 * and becomes the `upstream` tag of every series (give one to each target bound to the same
 * registry, or their meters collide); blank, it is refused with [InvalidInputException] naming
 * `upstream`. A group's breakers carry their key as `upstream`, its own two series none.
 *
 * A group's keys change: the breakers kept when [bindTo] runs get their meters then, and a key
 * first seen at a later read gets its meters registered by that read (so they are scraped from
 * that scrape or the next on); the meters of a key the group no longer keeps (evicted) are
 * removed from the registry by the read that finds it gone. A key that comes back starts again
 * from zero, which Prometheus reads as a counter reset.
 */
class HoldoffMetrics private constructor(
    source: () -> List<MetricReading>,
    upstream: String?,
) : MeterBinder {
    /** Binds a breaker's series, tagged `upstream` when given. */
    constructor(target: Breaker, upstream: String? = null) : this({ target.metrics() }, upstream)

    /** Binds a policy's retry series and its breaker's and quota's, tagged `upstream` when given. */
    constructor(target: Policy, upstream: String? = null) : this(policySource(target), upstream)

    /** Binds a retry quota's series, tagged `upstream` when given. */
    constructor(target: RetryQuota, upstream: String? = null) : this({ target.metrics() }, upstream)

    /** Binds a group's series and every kept breaker's, tagged `upstream` = its key. */
    constructor(target: BreakerGroup) : this({ target.metrics() }, null)

    private val reader: Reader

    init {
        if (upstream != null && upstream.isBlank()) {
            throw InvalidInputException("upstream", "HoldoffMetrics upstream must not be blank (null for none)")
        }
        reader = Reader(source, upstream)
    }

    override fun bindTo(registry: MeterRegistry) = reader.bind(registry)
}

private fun policySource(p: Policy): () -> List<MetricReading> {
    val breaker = p.breaker()
    val quota = p.quota()
    return { breaker.metrics() + (quota?.metrics() ?: emptyList()) + p.metrics() }
}

/** One series: a metric's name and its tags (its attribute, `upstream`). */
private data class Series(val name: String, val tags: Map<String, String>)

/** The table by name, read once from the core. */
private val TABLE: Map<String, MetricDef> by lazy { metricTable().associateBy { it.name } }

/**
 * The readings every meter of one binder shares. Each refresh is one read of the target; it
 * happens when a meter asks for a series it already had from the current read, i.e. once per
 * scrape however many meters there are.
 */
private class Reader(private val source: () -> List<MetricReading>, private val upstream: String?) {
    private var values: Map<Series, Double> = emptyMap()
    private val consumed = HashSet<Series>()
    private val bound = CopyOnWriteArrayList<Bound>()

    /** A registry and the meter of each series registered in it. */
    private class Bound(val registry: MeterRegistry) {
        val meters = HashMap<Series, Meter>()
    }

    private fun read(): Map<Series, Double> = source().associate { r ->
        val tags = if (upstream == null) r.attributes else r.attributes + ("upstream" to upstream)
        Series(r.name, tags) to r.value
    }

    fun bind(registry: MeterRegistry) {
        val keys = synchronized(this) {
            values = read()
            // Every series counts as read: the first scrape reads anew.
            consumed.addAll(values.keys)
            values.keys
        }
        val b = Bound(registry)
        bound += b
        sync(b, keys)
    }

    /** The series' value from the current read, reading anew if this series had it already. */
    fun value(s: Series): Double {
        var keys: Set<Series>? = null
        val v = synchronized(this) {
            if (!consumed.add(s)) {
                val before = values.keys
                values = read()
                consumed.clear()
                consumed.add(s)
                if (values.keys != before) keys = values.keys
            }
            values[s] ?: Double.NaN
        }
        // Registering and removing meters happens outside the lock: the registry takes its own.
        keys?.let { k -> bound.forEach { sync(it, k) } }
        return v
    }

    /** Registers a meter for each series of [keys] not in [b] yet, removes those gone. */
    private fun sync(b: Bound, keys: Set<Series>) = synchronized(b) {
        for (s in keys) if (s !in b.meters) b.meters[s] = register(b.registry, s)
        val gone = b.meters.keys - keys
        for (s in gone) b.registry.remove(b.meters.remove(s)!!)
    }

    private fun register(registry: MeterRegistry, s: Series): Meter {
        val def = TABLE[s.name] ?: error("${s.name} is not in the core's metric table")
        val tags = s.tags.map { (k, v) -> Tag.of(k, v) }
        val unit = if (def.unit == "s") "seconds" else null
        // The functions hold this reader (and through it the target) strongly: Micrometer keeps
        // only a weak reference to a meter's object, and nobody else keeps the binder.
        return when (def.kind) {
            MetricKind.COUNTER -> FunctionCounter.builder(def.name, this) { value(s) }
                .description(def.description).baseUnit(unit).tags(tags).register(registry)
            MetricKind.GAUGE -> Gauge.builder(def.name, this) { value(s) }
                .description(def.description).baseUnit(unit).tags(tags).strongReference(true).register(registry)
        }
    }
}
