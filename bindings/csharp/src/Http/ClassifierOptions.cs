using System;

namespace Holdoff
{
    /// <summary>Overrides of the HTTP classifier's defaults; every property null keeps the
    /// default. The core checks the values when the classifier is built:
    /// <see cref="InvalidConfigException"/> names the property and the field
    /// (classifier.failure_statuses, ...).</summary>
    public sealed class ClassifierOptions
    {
        /// <summary>Statuses (100..599) that count as failures; null: the default list.</summary>
        public int[] FailureStatuses { get; set; }

        /// <summary>Statuses (100..599) that count as answers (reachable, not retryable); null: the
        /// default list.</summary>
        public int[] AnswerStatuses { get; set; }

        /// <summary>Statuses (100..599) whose delay hint opens a retry-later wait; null: 429 and 503.</summary>
        public int[] RetryAfterStatuses { get; set; }

        /// <summary>The wait for a 429 without a usable hint (greater than zero); null (the
        /// default): the budget's counted backoff.</summary>
        public TimeSpan? RateLimitDefaultWait { get; set; }
    }
}
