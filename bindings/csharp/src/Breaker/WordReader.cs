using System.Collections.Generic;
using System.Threading;

namespace Holdoff
{
    /// <summary>One thread's slot naming the breaker whose fast-path word it is reading (null when
    /// none), so that Dispose can wait out a read in progress while readers write nothing shared:
    /// two threads on one breaker never contend for a cache line on the fast path.</summary>
    internal sealed class WordReader
    {
        /// <summary>The breaker whose word this thread is reading, or null.</summary>
        internal Breaker Reading;
        readonly Thread owner;

        [System.ThreadStatic] static WordReader mine;
        // Every live thread's slot that ever read a word (dead threads' slots are dropped when a
        // new one registers); the lock also orders registrations after a WaitOut's scan.
        static readonly List<WordReader> all = new List<WordReader>();

        WordReader(Thread owner) { this.owner = owner; }

        /// <summary>The calling thread's slot, registered on its first use.</summary>
        internal static WordReader Mine()
        {
            return mine ?? Register();
        }

        static WordReader Register()
        {
            var r = new WordReader(Thread.CurrentThread);
            lock (all)
            {
                all.RemoveAll(x => !x.owner.IsAlive);
                all.Add(r);
            }
            mine = r;
            return r;
        }

        /// <summary>Returns once no thread is reading <paramref name="b"/>'s word. The caller has
        /// already marked <paramref name="b"/> closed with a full fence, and a reader announces
        /// itself with a full fence before checking that mark: a reader this scan misses sees the
        /// mark and never touches the word.</summary>
        internal static void WaitOut(Breaker b)
        {
            lock (all)
            {
                foreach (var r in all)
                {
                    var spin = new SpinWait();
                    // A thread that died mid-read (aborted) reads nothing more.
                    while (Volatile.Read(ref r.Reading) == b && r.owner.IsAlive) spin.SpinOnce();
                }
            }
        }
    }
}
