#!/usr/bin/env python3
"""Validates every conformance case file against conformance/schema.json, plus the rules a
JSON Schema cannot express:

* case ids are unique across the whole suite;
* time never runs backwards within a case: every `at` (and every repetition
  `at + i * every_ms`) is at least the clock's time after the previous step, where
  `clock_set` / `clock_advance` move the clock too; a `clock_set` to an earlier time must
  expect `clock_backwards` (and then leaves the clock where it was);
* permits and leases are named before they are used (`record`, `record_foreign`, `after`,
  `quota_success`);
* every op has the part of the configuration it needs (a budget for `decide`, a quota for the
  quota ops, `"policy": true` for `before` / `after`, a breaker for breaker ops, `"group": true`
  for steps that name a `key` and for `group_snapshot`; `config.fleet` for `workers`,
  `worker` and the fleet ops, each `worker` below `workers`, and a fleet case's url
  `memory://<case id>`; `config.group` only in group cases;
  `"policy": true` for `execute`, whose attempts and waits move the clock).

Usage: python3 conformance/validate.py [CASES_DIR]
Prints one line per problem and a one-line summary; exits 1 on any problem.
Needs the `jsonschema` package (pip install jsonschema).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    import jsonschema
except ImportError:  # pragma: no cover - environment problem, not a case problem
    sys.exit("validate.py needs the jsonschema package: pip install jsonschema")

HERE = Path(__file__).resolve().parent

BREAKER_OPS = {"allow", "record", "call", "snapshot", "events", "force_open", "disable", "reset",
               "record_foreign"}
PERMIT_MAKERS = {"allow", "call", "before"}


def check_case(case: dict, where: str) -> list[str]:
    """Semantic checks of one schema-valid case; returns the problems."""
    problems: list[str] = []
    config = case.get("config", {})
    group = case.get("group", False)
    policy = case.get("policy", False)
    now = 0
    permits: set[str] = set()
    leases: set[str] = set()
    if "group" in config and not group:
        problems.append(f"{where}: config.group is only for group cases")
    workers = case.get("workers", 1 if "fleet" in config else 0)
    if "workers" in case and "fleet" not in config:
        problems.append(f"{where}: workers without config.fleet")
    if "steps" in case and "fleet" in config:
        url = config["fleet"].get("url")
        if url != f"memory://{case['id']}":
            problems.append(f"{where}: a fleet case's url must be memory://{case['id']} (got {url})")
    for i, step in enumerate(case.get("steps", [])):
        op = step["op"]
        here = f"{where} step {i} ({op})"
        repeat = step.get("repeat", 1)
        every = step.get("every_ms", 0)
        if "at" in step:
            if step["at"] < now:
                problems.append(f"{here}: at {step['at']} is earlier than the clock ({now})")
            now = max(now, step["at"] + (repeat - 1) * every)
        if op == "clock_set":
            backwards = step["to_ms"] < now
            expects = step.get("expect", {}).get("error") == "clock_backwards"
            if backwards and not expects:
                problems.append(f"{here}: sets the clock back to {step['to_ms']} (now {now}) "
                                f"without expecting clock_backwards")
            if expects and not backwards:
                problems.append(f"{here}: expects clock_backwards but {step['to_ms']} >= {now}")
            if not backwards:
                now = step["to_ms"]
        elif op == "clock_advance":
            now += step["by_ms"] * repeat
        elif op == "execute":
            # The helper moves the clock: each attempt made takes its `takes_ms`, each wait its
            # delay; the expectation says how many of each there are.
            exp = step.get("expect", {})
            made = step["script"][: len(exp.get("attempts", step["script"]))]
            took = sum(a.get("takes_ms", 0) for a in made)
            waited = sum(w.get("delay_ms", 0) for w in exp.get("waits", []))
            # Repetitions at fixed times overlap nothing: only the last one's duration counts.
            now += (took + waited) * (1 if "at" in step and every else repeat)

        if "worker" in step and not 0 <= step["worker"] < workers:
            problems.append(f"{here}: worker {step['worker']} but the case has {workers} workers")
        if op in {"fleet_sync", "fleet_store"} and not workers:
            problems.append(f"{here}: the case has no fleet")
        if op in BREAKER_OPS and "breaker" not in config:
            problems.append(f"{here}: the case has no breaker")
        if "key" in step and not group:
            problems.append(f"{here}: names a key but the case is not a group")
        if group and op in BREAKER_OPS - {"record", "record_foreign"} and "key" not in step:
            problems.append(f"{here}: a group case must name the key")
        if op in {"decide", "budget_state"} and "budget" not in config:
            problems.append(f"{here}: the case has no budget")
        if op in {"quota_acquire", "quota_success"} and "quota" not in config:
            problems.append(f"{here}: the case has no quota")
        if op == "group_snapshot" and not group:
            problems.append(f"{here}: group_snapshot needs \"group\": true")
        if op == "execute" and (not policy or group):
            problems.append(f"{here}: execute needs \"policy\": true and no group")
        if op in {"before", "after"} and not policy:
            problems.append(f"{here}: policy ops need \"policy\": true")

        if op in {"record", "record_foreign", "after"}:
            name = step["permit"]
            if name not in permits:
                problems.append(f"{here}: permit {name!r} was never named by an earlier `as`")
        if op == "quota_success" and "lease" in step and step["lease"] not in leases:
            problems.append(f"{here}: lease {step['lease']!r} was never named by an earlier `as`")
        if op in PERMIT_MAKERS and "as" in step:
            permits.add(step["as"])
        if op == "quota_acquire" and "as" in step:
            leases.add(step["as"])
    return problems


def main(argv: list[str]) -> int:
    cases_dir = Path(argv[1]) if len(argv) > 1 else HERE / "cases"
    schema = json.loads((HERE / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    problems: list[str] = []
    seen: dict[str, str] = {}
    files = sorted(cases_dir.rglob("*.json"))
    n_cases = 0
    for path in files:
        rel = path.relative_to(cases_dir)
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            problems.append(f"{rel}: not JSON: {e}")
            continue
        errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
        broken: set[int] = set()
        for e in errors:
            path = list(e.absolute_path)
            loc = "/".join(str(p) for p in path) or "(root)"
            problems.append(f"{rel}: {loc}: {e.message}")
            if len(path) >= 2 and path[0] == "cases":
                broken.add(path[1])
        cases = doc.get("cases") if isinstance(doc, dict) else None
        if not isinstance(cases, list) or (errors and not broken):
            continue
        for index, case in enumerate(cases):
            n_cases += 1
            cid = case.get("id") if isinstance(case, dict) else None
            if isinstance(cid, str):
                if cid in seen:
                    problems.append(f"{rel}: duplicate id {cid} (also in {seen[cid]})")
                seen[cid] = str(rel)
            if index not in broken:
                # Only schema-valid cases get the semantic checks (they rely on its shapes).
                problems.extend(check_case(case, f"{rel}: {cid}"))

    for p in problems:
        print(p)
    status = "ok" if not problems and n_cases else "FAILED"
    print(f"conformance cases: {len(files)} files, {n_cases} cases, "
          f"{len(problems)} problems: {status}")
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
