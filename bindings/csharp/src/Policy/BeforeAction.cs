using System;

namespace Holdoff
{
    /// <summary>What a policy says before an attempt.</summary>
    public enum BeforeAction : uint { Go = 0, Wait = 1, GiveUp = 2 }
}
