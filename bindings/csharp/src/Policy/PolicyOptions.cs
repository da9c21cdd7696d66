using System;

namespace Holdoff
{
    /// <summary>The parts of a <see cref="Policy"/> built by <see cref="Policy(PolicyOptions, Clock)"/>;
    /// a new instance holds the core's defaults and no quota.</summary>
    public sealed class PolicyOptions
    {
        BreakerOptions breaker = new BreakerOptions();
        BudgetOptions budget = new BudgetOptions();
        ClassifierOptions classifier = new ClassifierOptions();

        /// <summary>The breaker's configuration. Never null (ArgumentNullException).</summary>
        public BreakerOptions Breaker
        {
            get { return breaker; }
            set { breaker = value ?? throw new ArgumentNullException(nameof(value)); }
        }

        /// <summary>The retry budget's configuration. Never null (ArgumentNullException).</summary>
        public BudgetOptions Budget
        {
            get { return budget; }
            set { budget = value ?? throw new ArgumentNullException(nameof(value)); }
        }

        /// <summary>The retry quota's configuration; null (the default): no quota.</summary>
        public QuotaOptions Quota { get; set; }

        /// <summary>The HTTP classifier's overrides. Never null (ArgumentNullException).</summary>
        public ClassifierOptions Classifier
        {
            get { return classifier; }
            set { classifier = value ?? throw new ArgumentNullException(nameof(value)); }
        }
    }
}
