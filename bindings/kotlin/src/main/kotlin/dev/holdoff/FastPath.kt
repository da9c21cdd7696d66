// The healthy path without crossing into the native library: the breaker's fast-path word read in
// place (docs/ffi.md "The fast-path word"), for callers that admit and record on a hot loop.

package dev.holdoff

import com.sun.jna.JNIEnv
import com.sun.jna.Memory
import com.sun.jna.Native
import com.sun.jna.Pointer
import java.lang.invoke.MethodHandles
import java.lang.invoke.VarHandle
import java.lang.ref.Reference
import java.nio.ByteBuffer
import java.nio.ByteOrder
import kotlin.time.Duration.Companion.nanoseconds

/**
 * The breaker's admission and success check on its fast-path word, read in this process's
 * memory: while the breaker is closed (and its metrics are not counting), [acquire] and [allow]
 * admit a call, and a permit's success is recorded, without a native call. Everything else goes
 * to the library, so every decision is still the core's: an admission the word does not allow
 * (a refusal, a probe) with one plain call (`holdoff_uniffi_direct_allow`: the breaker's address
 * in, the answer packed in a `Long` out) through JNI ([DirectJni]) or, where that cannot bind,
 * JNA, and a failure, or a success while failures are pending or after the breaker moved on, through
 * `FastPathWord.record`.
 *
 * Make one per breaker with [Breaker.fastPath] (that call crosses into the library) and keep it;
 * it is thread-safe. The permits it admits are [Permit]s and behave as the breaker's own: record
 * each once ([Permit.record], [Permit.recordSuccess], or [record] here); a second record throws
 * [PermitAlreadyRecordedException]. Record them on the permit or through this object, not with
 * the generated `Breaker.record(permit, outcome)`, which accepts only permits the library made
 * (it throws `InternalException` for one admitted here).
 *
 * The word lives in the native breaker, which this object keeps alive, so no read can touch freed
 * memory. Once the breaker is closed ([Breaker.close]), every method throws
 * [IllegalStateException], as the breaker's own methods do.
 *
 * @property breaker the breaker whose word this reads.
 */
class FastPath internal constructor(
    val breaker: Breaker,
    layout: FastPathLayout,
    // Whether the library's admission is called through JNI ([DirectJni]) rather than JNA.
    private val jni: Boolean = DirectJni.bound,
) {
    // Holds the native breaker (and so the word) alive while this object is reachable.
    internal val word: FastPathWord = layout.word
    private val admitMask: Long = layout.admitMask.toLong()
    internal val breakerId: Int = layout.breakerId.toInt()
    private val breakerAddress: Long = layout.breakerAddress.toLong()

    // A direct buffer over the word's 8 bytes; null when the library's layout is not the one
    // this code reads (then every call goes to the library).
    private val buffer: ByteBuffer? =
        if (layout.version == LAYOUT_VERSION) {
            Pointer(layout.address.toLong()).getByteBuffer(0, 8).order(ByteOrder.nativeOrder())
        } else {
            null
        }

    /** Whether this breaker's word is read here (the library's layout version is the one this code knows). */
    val enabled: Boolean get() = buffer != null

    /** The word, read atomically with acquire ordering. */
    private fun load(buf: ByteBuffer): Long {
        val w = WORD.getAcquire(buf, 0) as Long
        // The word's memory belongs to `word`: it must stay reachable until the read is done.
        Reference.reachabilityFence(word)
        return w
    }

    private fun checkLive() {
        check(!breaker.uniffiIsDestroyed) { "Breaker object has already been destroyed" }
    }

    /**
     * Admits a call or throws `HoldoffException.BreakerOpen` (with the time until the next
     * probe), like [Breaker.acquire]: on the word alone while closed, else through the library.
     */
    fun acquire(): Permit {
        checkLive()
        val buf = buffer
        if (buf != null) {
            val w = load(buf)
            if (w and admitMask == 0L) return WordPermit(this, (w ushr 32).toInt(), 0)
        }
        return acquireFromLibrary(buf)
    }

    /**
     * [acquire] when the word does not admit: the library's answer. A method of its own so that
     * [acquire] stays small enough for the JIT to inline at the caller.
     */
    private fun acquireFromLibrary(buf: ByteBuffer?): Permit {
        if (buf != null) {
            val a = direct()
            when ((a and KIND_MASK).toInt()) {
                KIND_ADMITTED -> return WordPermit(this, (a ushr 2).toInt(), (a ushr 34).toInt())
                KIND_REFUSED -> throw HoldoffException.BreakerOpen(refusedWait(a))
                KIND_SPILLED -> when (val r = spilled()) {
                    is Admission.Admitted -> return r.permit
                    is Admission.Refused -> throw HoldoffException.BreakerOpen(r.retryAfter)
                    null -> {}
                }
            }
        }
        return breaker.acquire()
    }

    /**
     * The library's admission in one plain call with one primitive argument and a primitive
     * result, through JNI where [DirectJni] is bound, else JNA direct mapping: the answer packed
     * in a `Long` (bindings/uniffi/src/direct.rs), so nothing is read back from native memory.
     */
    private fun direct(): Long {
        val a = if (jni) DirectJni.allow(breakerAddress) else DirectLib.holdoff_uniffi_direct_allow(breakerAddress)
        // The breaker's memory belongs to `word`: it must stay reachable until the call is done.
        Reference.reachabilityFence(word)
        return a
    }

    /**
     * The answer [direct] could not pack, which the library keeps for the thread that made the
     * call (so this runs at once, on that thread); null if there is none.
     */
    private fun spilled(): Admission? {
        val out = Memory(24)
        val at = Pointer.nativeValue(out)
        val code = if (jni) DirectJni.spilled(at) else DirectLib.holdoff_uniffi_direct_spilled(at)
        val a = out.getLong(0)
        val b = out.getLong(8)
        val c = out.getLong(16)
        Reference.reachabilityFence(out)
        return when (code) {
            DIRECT_ADMITTED -> {
                val permit = WordPermit(this, a.toInt(), b.toInt())
                Admission.Admitted(permit, permit.episode(), b != 0L)
            }
            DIRECT_REFUSED -> Admission.Refused(if (a < 0) null else a.nanoseconds, STATES[b.toInt()], c)
            else -> null
        }
    }

    /** The time to the next probe of a packed refusal [a] (bits 21-63, plus 1); null while forced open. */
    private fun refusedWait(a: Long): kotlin.time.Duration? {
        val wait = a ushr 21
        return if (wait == 0L) null else (wait - 1).nanoseconds
    }

    /**
     * A packed refusal [a] as an [Admission.Refused]. A forced-open refusal carries no wait, so
     * the last one is kept and handed out again while it describes the answer (the object is
     * immutable): one allocation less on the path an operator's switch sends every call down.
     */
    private fun refused(a: Long): Admission.Refused {
        val state = STATES[((a ushr 2) and 7L).toInt()]
        val episode = (a ushr 5) and 0xFFFFL
        val wait = a ushr 21
        if (wait != 0L) return Admission.Refused((wait - 1).nanoseconds, state, episode)
        val cached = forcedOpen
        if (cached != null && cached.episode == episode && cached.state == state) return cached
        return Admission.Refused(null, state, episode).also { forcedOpen = it }
    }

    // The last refusal without a wait (forced open), reused while it describes the answer.
    @Volatile
    private var forcedOpen: Admission.Refused? = null

    /**
     * Admits a call ([Admission.Admitted], `episode` 0 and not a probe while closed) or refuses
     * it ([Admission.Refused]), like [Breaker.allow]: on the word alone while closed, else
     * through the library.
     */
    fun allow(): Admission {
        checkLive()
        val buf = buffer
        if (buf != null) {
            val w = load(buf)
            if (w and admitMask == 0L) return Admission.Admitted(WordPermit(this, (w ushr 32).toInt(), 0), 0L, false)
            val a = direct()
            when ((a and KIND_MASK).toInt()) {
                KIND_REFUSED -> return refused(a)
                KIND_ADMITTED -> {
                    val probe = (a ushr 34).toInt()
                    val permit = WordPermit(this, (a ushr 2).toInt(), probe)
                    return Admission.Admitted(permit, permit.episode(), probe != 0)
                }
                KIND_SPILLED -> spilled()?.let { return it }
            }
        }
        return breaker.allow()
    }

    /**
     * Records [outcome] for [permit], admitted by this breaker (here or by the breaker itself):
     * [ForeignPermitException] if another breaker admitted it, [PermitAlreadyRecordedException]
     * the second time; [InvalidInputException] naming `outcome.retry_later` for a negative delay.
     */
    fun record(permit: Permit, outcome: Outcome): Effect {
        checkLive()
        return when (permit) {
            is WordPermit -> {
                if (permit.fast.breakerId != breakerId) throw HoldoffException.ForeignPermit()
                permit.record(outcome)
            }
            else -> breaker.record(permit, outcome)
        }
    }

    /**
     * True when a success of a permit admitted on the word under [episode] changes nothing: the
     * breaker is still closed in that episode, with no failure pending and no flag set.
     */
    internal fun cleanSuccess(episode: Int): Boolean {
        val buf = buffer ?: return false
        return load(buf) == (episode.toLong() shl 32)
    }

    /**
     * Runs [block] through the breaker once, as [Breaker.execute] does (refused: throws
     * [BreakerOpenException] without running it; an exception is recorded as [classify] says and
     * re-thrown), admitting and recording a clean success on the word.
     */
    suspend fun <T> execute(
        classify: (Throwable) -> Outcome? = ::defaultOutcomeOf,
        block: suspend () -> T,
    ): T = runAdmitted(allow(), classify, block)

    /** The library's plain admission, bound by JNA direct mapping like the generated calls. */
    internal object DirectLib {
        external fun holdoff_uniffi_direct_allow(breaker: Long): Long

        external fun holdoff_uniffi_direct_spilled(out: Long): Int

        external fun holdoff_uniffi_direct_register_jni(env: JNIEnv): Int

        init {
            // The library the generated code loads (its override property honoured the same way).
            Native.register(DirectLib::class.java, LIBRARY)
        }
    }

    private companion object {
        // holdoff_uniffi_direct_allow's kinds, in bits 0-1 of its answer (src/direct.rs); the
        // fourth (-1) means nothing was decided: ask the breaker.
        const val KIND_MASK = 3L
        const val KIND_ADMITTED = 0
        const val KIND_REFUSED = 1
        const val KIND_SPILLED = 2

        // holdoff_uniffi_direct_spilled's answers; anything else: ask the breaker.
        const val DIRECT_ADMITTED = 0
        const val DIRECT_REFUSED = 1

        // In the core's numbering (0 closed ... 4 disabled), which the generated enum mirrors.
        val STATES: Array<State> = State.values()

        /** The word's layout this code reads (docs/ffi.md "The fast-path word"). */
        val LAYOUT_VERSION: UInt = 1u

        val WORD: VarHandle = MethodHandles.byteBufferViewVarHandle(LongArray::class.java, ByteOrder.nativeOrder())
    }
}

/**
 * The library's admission ([FastPath]'s refusals and probes) as JNI native methods
 * (bindings/uniffi/src/direct.rs): a JNI call costs the JVM a small fraction of a JNA one, and
 * on a refusal the crossing is most of the cost. The library binds them itself
 * (`holdoff_uniffi_direct_register_jni`, called once through JNA with this thread's `JNIEnv`),
 * in the copy JNA loaded, so it works wherever JNA found the library (a path, a jar). Where that
 * fails (another class loader's class, a library without these functions), [bound] is false and
 * [FastPath] calls the same functions through JNA.
 */
internal object DirectJni {
    /** Whether the methods below are bound to the library and speak the packing this code reads. */
    @JvmField
    val bound: Boolean = bind()

    /** `holdoff_uniffi_direct_allow`: the admission of the breaker at [breaker], packed. */
    @JvmStatic
    external fun allow(breaker: Long): Long

    /** `holdoff_uniffi_direct_spilled`: this thread's answer that did not pack, into [out] (3 longs). */
    @JvmStatic
    external fun spilled(out: Long): Int

    /** The packed answer's layout version (1); does nothing else (the JNI crossing alone). */
    @JvmStatic
    external fun version(): Int

    private fun bind(): Boolean =
        try {
            FastPath.DirectLib.holdoff_uniffi_direct_register_jni(JNIEnv.CURRENT) == 0 && version() == 1
        } catch (e: UnsatisfiedLinkError) {
            false
        }
}

/** The library the generated code loads (its override property honoured the same way). */
private val LIBRARY: String = System.getProperty("uniffi.component.holdoff.libraryOverride") ?: "holdoff_uniffi"

/**
 * The fast path of this breaker's word (one native call; keep the result). See [FastPath].
 */
fun Breaker.fastPath(): FastPath = FastPath(this, fastPathLayout())

/**
 * A permit of [fast]'s breaker held as its raw fields (the core's [episode] and [probe], 0 when
 * admitted while closed or disabled), admitted on the word or by the plain call. Recorded once,
 * like the library's permits: a closed permit's success that changes nothing is settled here,
 * anything else by `FastPathWord.record`.
 */
internal class WordPermit(val fast: FastPath, private val episode: Int, private val probe: Int) : Permit(NoHandle) {
    // 0 until taken for recording; a field (not an AtomicBoolean) so a permit is one object.
    @Volatile
    @JvmField
    internal var recorded: Int = 0

    override fun episode(): Long = if (probe == 0) 0L else episode.toUInt().toLong()

    override fun isProbe(): Boolean = probe != 0

    override fun isRecorded(): Boolean = recorded != 0

    private fun take() {
        check(!uniffiIsDestroyed) { "Permit object has already been destroyed" }
        // A lock rather than a compare-and-set: both make the take atomic, but the JIT drops a
        // lock on a permit that never leaves the caller's frame, and never drops a
        // compare-and-set (which costs about as much as the rest of acquire and recordSuccess).
        synchronized(this) {
            if (recorded != 0) throw HoldoffException.PermitAlreadyRecorded()
            recorded = 1
        }
    }

    override fun record(outcome: Outcome): Effect {
        take()
        if (outcome == Outcome.Success && probe == 0 && fast.cleanSuccess(episode)) return Effect.COUNTED
        return try {
            fast.word.record(episode.toUInt(), probe.toUInt(), outcome)
        } catch (e: HoldoffException.InvalidInput) {
            // Refused before it was taken, as the library's permits are: still recordable.
            synchronized(this) { recorded = 0 }
            throw e
        }
    }

    override fun recordSuccess() {
        take()
        if (probe != 0 || !fast.cleanSuccess(episode)) recordInLibrary(Outcome.Success)
    }

    // Out of line for the same reason as FastPath.acquireFromLibrary: the clean success above
    // stays small enough to inline.
    private fun recordInLibrary(outcome: Outcome): Effect = fast.word.record(episode.toUInt(), probe.toUInt(), outcome)

    override fun toString(): String =
        "Permit(breaker=${fast.breakerId}, episode=${episode()}, probe=${isProbe()}, recorded=${isRecorded()})"
}
