// The healthy path without crossing into the native library: the breaker's fast-path word read in
// place (docs/ffi.md "The fast-path word"), for callers that admit and record on a hot loop.

package dev.holdoff

import com.sun.jna.Memory
import com.sun.jna.Native
import com.sun.jna.Pointer
import java.lang.invoke.MethodHandles
import java.lang.invoke.VarHandle
import java.lang.ref.Reference
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater
import kotlin.time.Duration.Companion.nanoseconds

/**
 * The breaker's admission and success check on its fast-path word, read in this process's
 * memory: while the breaker is closed (and its metrics are not counting), [acquire] and [allow]
 * admit a call, and a permit's success is recorded, without a native call. Everything else goes
 * to the library, so every decision is still the core's: an admission the word does not allow
 * (a refusal, a probe) with one plain JNA call (`holdoff_uniffi_direct_allow`, primitives only),
 * and a failure, or a success while failures are pending or after the breaker moved on, through
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
class FastPath internal constructor(val breaker: Breaker, layout: FastPathLayout) {
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
            val out = SCRATCH.get()
            when (direct(out)) {
                DIRECT_ADMITTED -> return WordPermit(this, out.get(0).toInt(), out.get(1).toInt())
                DIRECT_REFUSED -> throw HoldoffException.BreakerOpen(retryAfterOf(out.get(0)))
            }
        }
        return breaker.acquire()
    }

    /**
     * The library's admission in one plain call (primitives only, so JNA takes its fastest
     * path); the answer's three fields land in this thread's [out] (bindings/uniffi/src/direct.rs).
     */
    private fun direct(out: Scratch): Int {
        val code = DirectLib.holdoff_uniffi_direct_allow(breakerAddress, out.address)
        // The breaker's memory belongs to `word`, the answer's to `out`: both must stay reachable
        // until the call is done.
        Reference.reachabilityFence(word)
        Reference.reachabilityFence(out)
        return code
    }

    private fun retryAfterOf(nanos: Long): kotlin.time.Duration? = if (nanos < 0) null else nanos.nanoseconds

    private fun admitted(out: Scratch): Admission.Admitted {
        val probe = out.get(1).toInt()
        val permit = WordPermit(this, out.get(0).toInt(), probe)
        return Admission.Admitted(permit, permit.episode(), probe != 0)
    }

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
            val out = SCRATCH.get()
            when (direct(out)) {
                DIRECT_ADMITTED -> return admitted(out)
                DIRECT_REFUSED -> return Admission.Refused(retryAfterOf(out.get(0)), State.entries[out.get(1).toInt()], out.get(2))
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

    /**
     * Three native 64-bit slots per thread for [direct]'s answer, passed by address and read
     * through a direct buffer: an array argument would send JNA down its slow, converting path.
     */
    private class Scratch {
        private val memory = Memory(24)
        val address: Long = Pointer.nativeValue(memory)
        private val view: ByteBuffer = memory.getByteBuffer(0, 24).order(ByteOrder.nativeOrder())

        fun get(i: Int): Long = view.getLong(i * 8)
    }

    /** The library's plain admission, bound by JNA direct mapping like the generated calls. */
    private object DirectLib {
        external fun holdoff_uniffi_direct_allow(breaker: Long, out: Long): Int

        init {
            // The library the generated code loads (its override property honoured the same way).
            Native.register(
                DirectLib::class.java,
                System.getProperty("uniffi.component.holdoff.libraryOverride") ?: "holdoff_uniffi",
            )
        }
    }

    private companion object {
        // holdoff_uniffi_direct_allow's answers (src/direct.rs); anything else: ask the breaker.
        const val DIRECT_ADMITTED = 0
        const val DIRECT_REFUSED = 1

        /** The word's layout this code reads (docs/ffi.md "The fast-path word"). */
        val LAYOUT_VERSION: UInt = 1u

        val WORD: VarHandle = MethodHandles.byteBufferViewVarHandle(LongArray::class.java, ByteOrder.nativeOrder())

        val SCRATCH: ThreadLocal<Scratch> = ThreadLocal.withInitial(::Scratch)
    }
}

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
        if (!RECORDED.compareAndSet(this, 0, 1)) throw HoldoffException.PermitAlreadyRecorded()
    }

    override fun record(outcome: Outcome): Effect {
        take()
        if (outcome == Outcome.Success && probe == 0 && fast.cleanSuccess(episode)) return Effect.COUNTED
        return try {
            fast.word.record(episode.toUInt(), probe.toUInt(), outcome)
        } catch (e: HoldoffException.InvalidInput) {
            // Refused before it was taken, as the library's permits are: still recordable.
            recorded = 0
            throw e
        }
    }

    override fun recordSuccess() {
        take()
        if (probe != 0 || !fast.cleanSuccess(episode)) {
            fast.word.record(episode.toUInt(), probe.toUInt(), Outcome.Success)
        }
    }

    override fun toString(): String =
        "Permit(breaker=${fast.breakerId}, episode=${episode()}, probe=${isProbe()}, recorded=${isRecorded()})"

    private companion object {
        val RECORDED: AtomicIntegerFieldUpdater<WordPermit> =
            AtomicIntegerFieldUpdater.newUpdater(WordPermit::class.java, "recorded")
    }
}
