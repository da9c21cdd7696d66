using System;

namespace Holdoff
{
    /// <summary>Why a delay hint is unusable (<see cref="Usable"/> when it is usable).</summary>
    public enum Unusable : uint { Usable = 0, Missing = 1, Malformed = 2, Signed = 3, Conflicting = 4 }
}
