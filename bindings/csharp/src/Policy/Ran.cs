using System;
using System.Threading.Tasks;

namespace Holdoff
{
    /// <summary>What one attempt came to: a value, an exception, or its time limit passing;
    /// and the helper's own failure while running it (its sleeper's), if any.</summary>
    internal struct Ran<T>
    {
        public bool Returned, TimedOut;
        public T Value;
        public Exception Error;
        /// <summary>The helper failed running the attempt (the sleeper timing it threw, the
        /// operation gave a null Task): a programming error, reported as a bug and thrown to the
        /// caller.</summary>
        public Exception Broken;

        public static Ran<T> Of(T value) { return new Ran<T> { Returned = true, Value = value }; }
        public static Ran<T> Threw(Exception e) { return new Ran<T> { Error = e }; }

        /// <summary>An asynchronous attempt outlived <paramref name="limit"/> and was left
        /// behind.</summary>
        public static Ran<T> OutOfTime(TimeSpan limit)
        {
            var e = new TimeoutException(string.Format("holdoff: the attempt did not finish within its time limit of {0}", limit));
            return new Ran<T> { TimedOut = true, Error = e };
        }

        /// <summary>The helper failed running an asynchronous attempt (the sleeper timing it
        /// threw, the operation gave a null Task): the attempt was left behind.</summary>
        public static Ran<T> HelperFailed(Exception e) { return new Ran<T> { Broken = e }; }
    }
}
