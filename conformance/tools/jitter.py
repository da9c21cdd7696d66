#!/usr/bin/env python3
"""Expected jittered intervals for conformance cases, computed independently of the core.

The core's jitter (core/src/backoff.rs) is documented as:
  base(n)     = min(initial * multiplier^n, max)             (n = 0, 1, ...)
  interval(n) = round(base(n) * (1 - jitter * u_n)) ms, at least 1 ms
  u_n         = (SplitMix64(seed).next_u64() >> 11) / 2^53     (one draw per jittered interval)
with rounding half away from zero. A breaker draws once when it trips (n = 0) and once per failed
probe (n = 1, 2, ...); a budget draws once per counted retry. This is a separate reimplementation
of that description, so a case's figures do not come from running the code under test.

Usage: python3 conformance/tools/jitter.py --initial 10000 --multiplier 2 --max 80000 \
           --jitter 0.5 --seed 42 --steps 5
"""

import argparse
import math

MASK = (1 << 64) - 1


class SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014); seed 0 gives 0xe220a8397b1dcdaf first."""

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def next_f64(self) -> float:
        return (self.next_u64() >> 11) / float(1 << 53)


def intervals(initial_ms: float, multiplier: float, max_ms: float, jitter: float, seed: int,
              steps: int) -> list[int]:
    rng = SplitMix64(seed)
    out = []
    for n in range(steps):
        base_ns = min(initial_ms * multiplier ** n, max_ms) * 1_000_000
        u = rng.next_f64()
        ms = base_ns * (1.0 - jitter * u) / 1e6
        out.append(max(1, int(math.floor(ms + 0.5))))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--initial", type=float, required=True, help="first interval, ms")
    p.add_argument("--multiplier", type=float, required=True)
    p.add_argument("--max", type=float, required=True, help="cap, ms")
    p.add_argument("--jitter", type=float, required=True, help="fraction in [0, 1)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args()
    assert SplitMix64(0).next_u64() == 0xE220A8397B1DCDAF, "SplitMix64 reference vector"
    print(intervals(a.initial, a.multiplier, a.max, a.jitter, a.seed, a.steps))


if __name__ == "__main__":
    main()
