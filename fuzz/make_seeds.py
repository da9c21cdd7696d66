#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (fuzz/corpus/<target>/) from the project's real
inputs: the conformance cases, the bundled scenarios and traces, and the trace formats the CLI
tests use. Deterministic; rerun after the cases change. The `stateful` target's seeds are
libFuzzer inputs (arbitrary bytes) kept from fuzzing runs and are not regenerated here.

    python3 fuzz/make_seeds.py
"""

import hashlib
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
MAX_PER_TARGET = 40


def cases():
    for path in sorted((ROOT / "conformance" / "cases").rglob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            yield path, case


def write(target, items):
    """Writes up to MAX_PER_TARGET distinct items, spread evenly over the list."""
    out = CORPUS / target
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    seen, unique = set(), []
    for data in items:
        data = data if isinstance(data, bytes) else data.encode()
        if data not in seen:
            seen.add(data)
            unique.append(data)
    step = max(1, len(unique) / MAX_PER_TARGET)
    picked = [unique[int(i * step)] for i in range(min(MAX_PER_TARGET, len(unique)))]
    for data in picked:
        (out / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)
    print(f"{target}: {len(picked)} seeds of {len(unique)} candidates")


def retry_after_seeds():
    for _, case in cases():
        origin = case.get("clock", {}).get("wall_origin_unix_ms", 0)
        at = 0
        for step in case.get("steps", []):
            at = step.get("at", at)
            wall = origin + at
            if step.get("op") == "parse_retry_after":
                yield f"{step['value']}\n{wall}"
            elif step.get("op") in ("hint", "classify", "after") and step.get("headers"):
                headers = step["headers"]
                first = next((v for n, v in headers if n.lower() == "retry-after"), "")
                lines = [first, str(wall)] + [f"{n}: {v}" for n, v in headers]
                yield "\n".join(lines)


def config_seeds():
    for path in sorted((ROOT / "scenarios").rglob("*")):
        if path.suffix in (".toml", ".json") and "schema" not in path.name:
            yield path.read_bytes()
    for _, case in cases():
        if "config" in case:
            yield json.dumps(case["config"], indent=1)


def case_seeds():
    # Small cases first, so that the seeds stay short; one of each area at least.
    all_cases = sorted(cases(), key=lambda pc: len(json.dumps(pc[1])))
    for _, case in all_cases:
        text = json.dumps(case, indent=1)
        if len(text) < 4000:
            yield text


def trace_seeds():
    csv = (ROOT / "scenarios" / "traces" / "blocked-provider.csv").read_text().splitlines()
    yield "0\n" + "\n".join(csv[:25]) + "\n"
    yield "0\nt_ms,status,retry_after\n0,503,\n20000,200,\n"
    yield "0\nt_ms,status,latency_ms\n0,200,12.5\n1000,500,\n1000,503,0\n"
    yield ('0\ntime,status,retry_after\n2026-03-01T10:00:00Z,429,"Sun, 01 Mar 2026 10:02:00 GMT"\n'
           "2026-03-01T10:01:00Z,200,\n")
    yield "0\nt_ms,status\n0,200\n1000,abc\n2000,700\n3000,200\n"
    yield "0\nt_ms,status,colour\n0,200,red\n"
    yield "0\nt_ms,status\n0,200,9\n"
    yield "8\ntime,status\n2019-06-03T11:00:05+02:00,503\n2019-06-03T12:00:00Z,200\n"
    yield '1\n{"t_ms": 0, "status": 503, "retry_after": 120}\n{"t_ms": 500.5, "status": 200}\n'
    yield '1\n{"time": "2026-01-01T00:00:10Z", "status": 200}\n{"time": "2026-01-01T00:00:09Z", "status": 200}\n'
    yield '1\n{"t_ms": 0, "status": 429, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT", "latency_ms": 3}\n\n'
    yield '1\n\n{"t_ms": 0, "status": "ok"}\n{"t_ms": 0, "status": 200, "colour": 1}\n'
    yield '9\n{"time": "2019-06-03T11:00:00Z", "status": 200}\n'
    yield ('2\n127.0.0.1 - - [10/Oct/2026:13:55:36 +0000] "GET / HTTP/1.1" 200 5\n'
           '10.0.0.1 - - [10/Oct/2026:13:55:37 +0000] "GET /v1/items HTTP/1.1" 503 512\nnope\n')
    yield ('3\n10.0.0.1 - alice [01/Mar/2026:11:00:01 +0100] "GET /v1/items?id=7 HTTP/1.1" 429 512 "-" "curl/8.0"\n'
           '10.0.0.1 - - [01/Mar/2026:10:00:02 +0000] "GET /v1/items HTTP/1.1" 200 512 "https://a.example/" "Mozilla/5.0"\n')
    yield "3\nthis is not a log line\n"


if __name__ == "__main__":
    write("retry_after", retry_after_seeds())
    write("config", config_seeds())
    write("case_loader", case_seeds())
    write("trace_import", trace_seeds())
