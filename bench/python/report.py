"""Prints pytest-benchmark's JSON as one table (per-operation medians and ratios), the
baselines included, which the cross-language records leave out (of the floors, they keep the
no-op crossing)."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

from records import version

ROWS = [
    ("allow+record (closed)", [
        ("holdoff `record(allow(), SUCCESS)`", "test_holdoff_allow_record"),
        ("pybreaker `with cb.calling()`", "test_pybreaker_calling"),
        ("pybreaker `cb.call(noop)`", "test_pybreaker_call"),
        ("purgatory `with factory.get_breaker(name)`", "test_purgatory_context"),
        ("one no-op native method call (floor)", "test_floor_noop_crossing"),
        ("two trivial native getters", "test_two_native_calls"),
        ("empty loop (baseline)", "test_empty_loop"),
    ]),
    ("refusal (open)", [
        ("holdoff `allow()` raising `BreakerOpen`", "test_holdoff_refuse_open"),
        ("pybreaker `cb.call` raising `CircuitBreakerError`", "test_pybreaker_refuse_open"),
        ("purgatory `get_breaker` raising `OpenedState`", "test_purgatory_refuse_open"),
        ("aiobreaker `await cb.call_async` raising", "test_aiobreaker_refuse_open"),
    ]),
    ("decorated trivial function", [
        ("holdoff `@policy`", "test_holdoff_decorated"),
        ("pybreaker `@cb`", "test_pybreaker_decorated"),
        ("tenacity `@retry(stop_after_attempt(3))`", "test_tenacity_decorated"),
        ("purgatory `@factory(name)`", "test_purgatory_decorated"),
        ("aiobreaker `await cb.call_async(coro)`", "test_aiobreaker_call_async"),
        ("undecorated call (baseline)", "test_plain_call"),
    ]),
]


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    per_op = {}
    best = {}
    for b in data["benchmarks"]:
        ops = b["extra_info"].get("ops", 1)
        per_op[b["name"]] = b["stats"]["median"] / ops * 1e9
        best[b["name"]] = b["stats"]["min"] / ops * 1e9
    try:
        load = " (load average %.1f on %d cores during the run)" % (
            __import__("os").getloadavg()[0], __import__("os").cpu_count() or 0)
    except OSError:
        load = ""
    lines = [
        f"Median per operation, CPython {platform.python_version()}, {data['machine_info'].get('cpu', {}).get('brand_raw', platform.machine())}, "
        f"holdoff release build; pybreaker {version('pybreaker')}, tenacity {version('tenacity')}, "
        f"purgatory {version('purgatory')}, aiobreaker {version('aiobreaker')}{load}.",
        "",
        "| operation | implementation | median ns/op | min ns/op | median vs holdoff |",
        "|---|---|---:|---:|---:|",
    ]
    for group, rows in ROWS:
        base = per_op[rows[0][1]]
        for label, name in rows:
            ns = per_op[name]
            lines.append(f"| {group} | {label} | {ns:,.0f} | {best[name]:,.0f} | {ns / base:.2f}x |")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
