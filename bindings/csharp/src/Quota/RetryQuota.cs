using System;
using System.Collections.Generic;
using Holdoff.Interop;

namespace Holdoff
{
    /// <summary>A token bucket shared by every caller of an upstream: each retry takes tokens
    /// (<see cref="Acquire"/>), each success gives some back (<see cref="OnSuccess()"/>). Thread-safe.</summary>
    public sealed class RetryQuota : IDisposable
    {
        internal readonly RetryQuotaHandle Handle;

        internal RetryQuota(RetryQuotaHandle h) { Handle = h; }

        /// <summary>A full bucket. Throws InvalidConfigException (an ArgumentException) naming the
        /// invalid property and field; ArgumentNullException for a null <paramref name="options"/>.</summary>
        public RetryQuota(QuotaOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            Handle = new ConfigJson().Quota(options).Build(c => c.NewRetryQuota()).Handle;
        }

        /// <summary>Takes the tokens of one retry (the timeout cost when
        /// <paramref name="afterTimeout"/>, else the retry cost), or none when too few are left
        /// (<see cref="QuotaLease.Acquired"/> false: do not retry).</summary>
        public QuotaLease Acquire(bool afterTimeout)
        {
            QuotaLeaseC l;
            Status.Check(Native.holdoff_retry_quota_acquire(Handle, (byte)(afterTimeout ? 1 : 0), out l));
            return new QuotaLease(l);
        }

        /// <summary>A call that needed no retry succeeded: adds the configured refill, never past
        /// capacity.</summary>
        public void OnSuccess()
        {
            Status.Check(Native.holdoff_retry_quota_on_success_no_lease(Handle, IntPtr.Zero));
        }

        /// <summary>A retried call succeeded: refunds <paramref name="lease"/>, never past capacity.
        /// The core checks the lease: <see cref="PermitException"/> (Field lease) named
        /// permit_already_recorded when it was already given back, foreign_permit when another
        /// quota issued it (it stays usable there); <see cref="InvalidInputException"/> when it was
        /// never acquired; ArgumentNullException for null (<see cref="OnSuccess()"/> is the success
        /// without a lease). The bucket is unchanged on every error.</summary>
        public void OnSuccess(QuotaLease lease)
        {
            if (lease == null) throw new ArgumentNullException(nameof(lease));
            Status.Check(Native.holdoff_retry_quota_on_success(Handle, ref lease.Raw));
        }

        /// <summary>Tokens in the bucket now.</summary>
        public ulong Available
        {
            get
            {
                ulong n;
                Status.Check(Native.holdoff_retry_quota_available(Handle, out n));
                return n;
            }
        }

        /// <summary>The quota's series (<see cref="MetricTable.All"/>, docs/metrics.md):
        /// <c>holdoff.quota.tokens</c> (a gauge, tokens left now) and <c>holdoff.quota.refused</c>
        /// (retries refused for want of tokens, counted from the first read, which starts the
        /// counting). ObjectDisposedException after Dispose.</summary>
        public IReadOnlyList<MetricReading> Metrics()
        {
            MetricListHandle list;
            Status.Check(Native.holdoff_retry_quota_metrics(Handle, out list));
            return MetricReading.Read(list);
        }

        /// <summary>Releases the quota.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
