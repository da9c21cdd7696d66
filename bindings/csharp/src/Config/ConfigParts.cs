using System;

namespace Holdoff
{
    /// <summary>Which parts a <see cref="HoldoffConfig"/> has.</summary>
    [Flags]
    public enum ConfigParts : uint { None = 0, Breaker = 1, Budget = 2, Quota = 4, Classifier = 8, Group = 16, Execute = 32 }
}
