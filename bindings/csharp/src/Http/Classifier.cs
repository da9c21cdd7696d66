using System;
using System.Collections.Generic;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>Turns an HTTP response (status and headers) into an outcome. Thread-safe.</summary>
    public sealed class Classifier : IDisposable
    {
        internal readonly ClassifierHandle Handle;

        internal Classifier(ClassifierHandle h) { Handle = h; }

        /// <summary>A classifier with <paramref name="options"/>' overrides. Throws
        /// InvalidConfigException (an ArgumentException) naming the invalid property and field;
        /// ArgumentNullException for a null <paramref name="options"/>.</summary>
        public Classifier(ClassifierOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            Handle = new ConfigJson().Classifier(options).Build(c => c.NewClassifier()).Handle;
        }

        /// <summary>Classifies a response: <paramref name="status"/> is whatever integer the HTTP
        /// client gave. 0..999 is a status (one outside 100..599 is a broken upstream: a failure,
        /// whatever the headers say); the core refuses any other value with InvalidInputException
        /// (an ArgumentException, Name invalid_input, ParamName status). HTTP-dates are compared
        /// with the wall time <paramref name="now"/>. <paramref name="headers"/> are (name, value)
        /// pairs, one per field value (an empty list for none); ArgumentNullException for null.</summary>
        public Classification Classify(long status, IList<KeyValuePair<string, string>> headers, DateTimeOffset now)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var hs = Units.Headers(headers, allocated);
                ClassificationC c;
                Status.Check(Native.holdoff_classifier_classify(Handle, status, hs,
                    (UIntPtr)hs.Length, Units.UnixNs(now, "now"), out c));
                return new Classification(c);
            }
            finally
            {
                Units.Free(allocated);
            }
        }

        /// <summary>Releases the classifier.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
