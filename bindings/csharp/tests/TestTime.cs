// A sleeper for the retry helpers on a ManualClock: a wait (announced by OnRetry) moves the clock
// by its delay at once; any other sleep is an attempt's timer, which fires when the clock reaches
// it (the test moves the clock with Advance or Set).
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Holdoff.Tests
{
    sealed class TestTime
    {
        sealed class Timer
        {
            public TimeSpan Due;
            public TaskCompletionSource<bool> Fired;
        }

        public readonly ManualClock Clock;
        readonly object gate = new object();
        readonly List<Timer> timers = new List<Timer>();
        /// <summary>The waits slept, in order.</summary>
        public readonly List<TimeSpan> Waits = new List<TimeSpan>();
        volatile bool nextIsWait;

        public TestTime(ManualClock clock) { Clock = clock; }

        /// <summary>Makes <paramref name="p"/> sleep here; <paramref name="onRetry"/> is its
        /// OnRetry too.</summary>
        public void Attach(Policy p, Action<RetryWait> onRetry = null)
        {
            p.Sleeper = Sleep;
            p.OnRetry = w =>
            {
                nextIsWait = true;
                if (onRetry != null) onRetry(w);
            };
        }

        public Task Sleep(TimeSpan d, CancellationToken ct)
        {
            if (nextIsWait)
            {
                nextIsWait = false;
                ct.ThrowIfCancellationRequested();
                lock (gate) Waits.Add(d);
                Advance(d);
                return Task.FromResult(true);
            }
            var t = new Timer { Due = Clock.Now + d, Fired = new TaskCompletionSource<bool>() };
            lock (gate) timers.Add(t);
            ct.Register(() =>
            {
                lock (gate) timers.Remove(t);
                t.Fired.TrySetCanceled();
            });
            return t.Fired.Task;
        }

        /// <summary>Timers waiting for the clock.</summary>
        public int Pending
        {
            get { lock (gate) return timers.Count; }
        }

        public void Advance(TimeSpan d)
        {
            Clock.Advance(d);
            Fire();
        }

        public void Set(TimeSpan t)
        {
            Clock.Set(t);
            Fire();
        }

        /// <summary>Completes the timers that are due, earliest first, outside the lock: what
        /// they resume may sleep again.</summary>
        void Fire()
        {
            var now = Clock.Now;
            List<Timer> due;
            lock (gate)
            {
                due = timers.FindAll(t => t.Due <= now);
                timers.RemoveAll(t => t.Due <= now);
            }
            due.Sort((a, b) => a.Due.CompareTo(b.Due));
            foreach (var t in due) t.Fired.TrySetResult(true);
        }
    }
}
