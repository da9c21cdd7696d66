"""The Python side of the cross-language benchmark's records (one JSON object per line, appended
to $HOLDOFF_BENCH_OUT; the format is shared by every language's bench).

    records.py timings BENCH_JSON   the pytest-benchmark results of bench_hot_path.py: every test
                                    with extra_info["op"] becomes one record, one ns/op per round
    records.py memory               bytes per breaker / per idle group entry, allocations per
                                    allow+record (run by bench/python/run.sh with PYTHONMALLOC=malloc, so
                                    that every allocation, Python's and the Rust extension's, is a
                                    malloc; and with LD_PRELOAD=alloccount.so when it was built)

Memory is glibc's count of bytes in use (mallinfo2; chunk headers included) before and after
creating 20k objects, repeated 5 times in this process (freed memory leaves the count).
Allocations are malloc/calloc/realloc/memalign calls counted by alloccount.so.
Without HOLDOFF_BENCH_OUT, only the summary is printed.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import statistics
import sys
from importlib import metadata
from typing import Any, Callable

SAMPLES = 5
MEM_N = 20_000


def emit(subject: str, op: str, unit: str, samples: list[float], note: str) -> None:
    s = sorted(samples)
    print(f"{subject:<11} {op:<24} {statistics.median(s):>10.1f} {unit:<9} "
          f"(min {s[0]:.1f}, max {s[-1]:.1f})  {note}")
    path = os.environ.get("HOLDOFF_BENCH_OUT")
    if path:
        rec = {"lang": "python", "subject": subject, "op": op, "unit": unit,
               "samples": [round(x, 3) for x in samples], "note": note}
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def timings(path: str) -> None:
    data = json.loads(open(path).read())
    for b in sorted(data["benchmarks"], key=lambda b: (b["extra_info"].get("op") or "", b["name"])):
        info = b["extra_info"]
        if not info.get("op"):
            continue
        subject = info["subject"]
        note = info["note"]
        if subject not in ("holdoff", "floor"):
            note += f", {subject} {version(subject)}"
        emit(subject, info["op"], "ns/op", [t / info["ops"] * 1e9 for t in b["stats"]["data"]], note)


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2


def heap() -> int:
    m = libc.mallinfo2()
    return int(m.uordblks + m.hblkhd)


def per_object(make: Callable[[Any, int], Any], setup: Callable[[], Any] = lambda: None) -> list[float]:
    """Heap bytes per object: make(ctx, i) MEM_N times, ctx = setup() made before the reading."""
    out = []
    for _ in range(SAMPLES):
        keep: list[Any] = [None] * MEM_N
        ctx = setup()
        gc.collect()
        h0 = heap()
        for i in range(MEM_N):
            keep[i] = make(ctx, i)
        gc.collect()
        out.append((heap() - h0) / MEM_N)
        del keep, ctx
        gc.collect()
    return out


def memory() -> None:
    import aiobreaker
    import pybreaker
    import purgatory

    import holdoff

    if os.environ.get("PYTHONMALLOC") != "malloc":
        print("memory: needs PYTHONMALLOC=malloc (bench/python/run.sh sets it): skipped")
        return
    how = "glibc mallinfo2 in-use delta over 20k objects, PYTHONMALLOC=malloc: "
    holdoff.Breaker()
    emit("holdoff", "bytes_per_breaker", "bytes", per_object(lambda _, i: holdoff.Breaker()),
         how + "holdoff.Breaker() (Python object + core breaker)")
    emit("pybreaker", "bytes_per_breaker", "bytes",
         per_object(lambda _, i: pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)),
         how + f"pybreaker.CircuitBreaker(fail_max=5), pybreaker {version('pybreaker')}")
    emit("aiobreaker", "bytes_per_breaker", "bytes", per_object(lambda _, i: aiobreaker.CircuitBreaker(fail_max=5)),
         how + f"aiobreaker.CircuitBreaker(fail_max=5), aiobreaker {version('aiobreaker')}")
    keys = [f"host-{i}" for i in range(MEM_N)]
    emit("holdoff", "bytes_per_group_entry", "bytes",
         per_object(lambda g, i: g.get(keys[i]), setup=holdoff.BreakerGroup),
         how + "group.get('host-N') of 20k new keys, the returned breakers kept (key strings made beforehand)")
    emit("purgatory", "bytes_per_group_entry", "bytes",
         per_object(lambda f, i: f.get_breaker(keys[i]),
                    setup=lambda: purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)),
         how + f"factory.get_breaker('host-N') of 20k new names (its per-name registry), purgatory {version('purgatory')}")

    try:
        count = libc.holdoff_alloc_count
    except AttributeError:
        print("allocations: alloccount.so not preloaded (gcc missing?): skipped")
        return
    count.restype = ctypes.c_long
    n = 20_000

    def allocs(batch: Callable[[int], None]) -> list[float]:
        batch(1000)
        out = []
        for _ in range(SAMPLES):
            c0 = count()
            batch(n)
            out.append((count() - c0) / n)
        return out

    b = holdoff.Breaker()
    allow, record, ok = b.allow, b.record, holdoff.Outcome.SUCCESS

    def h(k: int) -> None:
        for _ in range(k):
            record(allow(), ok)

    cb = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)

    def p(k: int) -> None:
        for _ in range(k):
            with cb.calling():
                pass

    factory = purgatory.SyncCircuitBreakerFactory(default_threshold=5, default_ttl=30)

    def q(k: int) -> None:
        for _ in range(k):
            with factory.get_breaker("bench"):
                pass

    how = "malloc-family calls (LD_PRELOAD counter, PYTHONMALLOC=malloc) per op: "
    emit("holdoff", "allocs_per_allow_record", "allocs/op", allocs(h),
         how + "b.record(b.allow(), Outcome.SUCCESS) (the Permit object)")
    emit("pybreaker", "allocs_per_allow_record", "allocs/op", allocs(p),
         how + f"with cb.calling(): pass, pybreaker {version('pybreaker')}")
    emit("purgatory", "allocs_per_allow_record", "allocs/op", allocs(q),
         how + f"with factory.get_breaker('bench'): pass, purgatory {version('purgatory')}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["timings"]:
        timings(sys.argv[2])
    elif sys.argv[1:2] == ["memory"]:
        memory()
    else:
        sys.exit(__doc__)
