#!/usr/bin/env python3
"""The report of `bash bench/run`: results.md (tables), chart.svg, run.json, and the tables of
docs/performance.md.

Input: the JSON Lines records every language's bench appends (one per lang, subject, op, with raw
per-repetition samples), the per-language accounting bench/run wrote (langs.tsv) and the machine
description (machine.txt). Output: median [min, max] per subject and op, and each peer's median
divided by holdoff's median in the same language and run.

Runs on the standard library alone; the chart needs matplotlib (bench/run installs it in a venv)
and is skipped with a warning without it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import sys
from collections import OrderedDict
from pathlib import Path

LANGS = ["rust", "python", "node", "go", "c", "csharp", "kotlin"]
LANG_NAMES = {"rust": "Rust", "python": "Python", "node": "Node", "go": "Go", "c": "C", "csharp": "C# (Mono)", "kotlin": "Kotlin"}
OPS = [
    "allow_record",
    "allow_record_metrics",
    "allow_record_fleet",
    "allow_record_2t",
    "refuse_open",
    "budget_429",
    "protected_call",
    "bytes_per_breaker",
    "bytes_per_group_entry",
    "allocs_per_allow_record",
    "group_lookup_10",
    "group_lookup_10k",
    "group_lookup_1m",
    "replay_1m",
    "replay_10m",
]
# The ops the chart shows: per-call times, comparable across subjects.
CHART_OPS = ["allow_record", "allow_record_2t", "refuse_open", "budget_429", "protected_call"]
# Another process using more than this many cores on average during a language's run marks
# that language's figures as taken on a loaded machine.
LOADED_CORES = 0.25
MIN_REPS = 5
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
CHART_ALT = "per-call costs, median with min-max bars"


def warn(msg: str) -> None:
    print(f"[bench] report: {msg}", file=sys.stderr)


def load_records(path: Path) -> tuple[dict, list[str]]:
    """{lang: {subject: {op: record}}} in order of first appearance, and the problems found."""
    data: dict = OrderedDict()
    problems = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            lang, subject, op = r["lang"], r["subject"], r["op"]
            samples = [float(x) for x in r["samples"]]
            if not samples or not all(math.isfinite(x) for x in samples):
                raise ValueError("samples must be finite numbers, at least one")
        except (ValueError, KeyError, TypeError) as e:
            problems.append(f"line {n}: unreadable record ({e})")
            continue
        if len(samples) < MIN_REPS:
            problems.append(f"{lang}/{subject}/{op}: {len(samples)} samples (< {MIN_REPS})")
        r["samples"] = samples
        r.setdefault("unit", "ns/op")
        r.setdefault("note", "")
        subjects = data.setdefault(lang, OrderedDict())
        if op in subjects.setdefault(subject, OrderedDict()):
            problems.append(f"{lang}/{subject}/{op}: recorded twice, the last one is shown")
        subjects[subject][op] = r
    return data, problems


def stats(r: dict) -> tuple[float, float, float]:
    s = r["samples"]
    return statistics.median(s), min(s), max(s)


def num(x: float, unit: str) -> str:
    if unit == "allocs/op":
        return f"{x:.2f}"
    if unit == "bytes":
        return f"{x:,.0f}"
    if abs(x) < 10:
        return f"{x:.2f}"
    if abs(x) < 100:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def cell(r: dict | None) -> str:
    if r is None:
        return "—"
    med, lo, hi = stats(r)
    u = r["unit"]
    return f"{num(med, u)} [{num(lo, u)}, {num(hi, u)}]"


def ratio(peer: dict | None, ours: dict | None) -> str:
    if peer is None or ours is None or peer["unit"] != ours["unit"]:
        return "—"
    p, h = stats(peer)[0], stats(ours)[0]
    if h == 0:
        return "same" if p == 0 else "—"
    x = p / h
    return f"{x:.2f}×" if x < 10 else f"{x:.0f}×"


def read_tsv(path: Path) -> dict:
    if not path.exists():
        return {}
    with path.open(encoding="utf-8") as f:
        return {row["lang"]: row for row in csv.DictReader(f, delimiter="\t")}


def read_machine(path: Path) -> dict:
    m = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            k, _, v = line.partition("=")
            m[k] = v
    return m


def peer_versions(subjects: dict) -> str:
    """The peers with the version their notes give ("failsafe 1.3.0"), else the name alone."""
    out = []
    for name, ops in subjects.items():
        if name in ("holdoff", FLOOR):
            continue
        short = re.escape(name.rsplit("/", 1)[-1])
        found = None
        for r in ops.values():
            m = re.search(rf"\b{short}(?:/v\d+)?[ @]v?(\d+\.\d+(?:\.\d+)?\S*?)[,;)]?(?:\s|$)", r["note"])
            if m:
                found = m.group(1)
                break
        out.append(f"{name} {found}" if found else name)
    return ", ".join(out) if out else "none"


# The subject whose ops are the least holdoff can cost in that language. Its first call op is
# the least a holdoff call pays: `noop_crossing`, one no-op call across the binding's FFI (what a
# binding pays whenever it calls into the library), or `clock_read` in Rust, the clock reading
# every refusal while open takes. Shown under the table, not as a peer, with holdoff's ops that
# pay it as multiples of it.
FLOOR = "floor"
FLOOR_OPS = {
    "noop_crossing": ["allow_record", "refuse_open", "protected_call", "budget_429"],
    "clock_read": ["refuse_open"],
}
# The floor's size ops, each shown on a line of its own under the call floor's, with holdoff's
# figure as a multiple of it: `bytes_per_breaker`, the least a breaker can take where the
# binding's object must hold a native one (C#: a managed object holding nothing but the native
# breaker's pointer, and that native breaker).
FLOOR_SIZE_OPS = {"bytes_per_breaker": ["bytes_per_breaker"]}


def floor_sentence(label: str, op: str, r: dict, ours: dict, paying: list[str]) -> str:
    """"<label>, `op` (note): median unit; holdoff's `o` n.nn×, ... of it." for the ops of
    `paying` holdoff recorded in the floor's unit."""
    base = statistics.median(r["samples"])
    parts = [
        f"`{o}` {statistics.median(ours[o]['samples']) / base:.2f}×"
        for o in paying
        if o in ours and ours[o]["unit"] == r["unit"] and base > 0
    ]
    text = f"{label}, `{op}` ({r['note'] or 'no note'}): {num(base, r['unit'])} {r['unit']}"
    if parts:
        text += "; holdoff's " + ", ".join(parts) + " of it"
    return text + "."


def floor_line(subjects: dict) -> list[str]:
    """The floor's sentences, each after a blank line: the call floor's median with holdoff's ops
    that pay it as multiples of it, then each size floor's with holdoff's figure."""
    floor = subjects.get(FLOOR, {})
    ours = subjects.get("holdoff", {})
    out = []
    calls = [(op, r) for op, r in floor.items() if op not in FLOOR_SIZE_OPS]
    if calls:
        op, r = calls[0]
        out += ["", floor_sentence("Floor", op, r, ours, FLOOR_OPS.get(op, []))]
    for op, r in floor.items():
        if op in FLOOR_SIZE_OPS:
            out += ["", floor_sentence("Bytes floor", op, r, ours, FLOOR_SIZE_OPS[op])]
    return out


def lang_table(lang: str, subjects: dict) -> list[str]:
    floor = floor_line(subjects)
    subjects = OrderedDict((k, v) for k, v in subjects.items() if k != FLOOR)
    peers = [s for s in subjects if s != "holdoff"]
    ours = subjects.get("holdoff", {})
    ops = [o for o in OPS if any(o in s for s in subjects.values())]
    ops += [o for s in subjects.values() for o in s if o not in ops]
    ops = list(OrderedDict.fromkeys(ops))
    head = ["op", "unit", "holdoff"]
    for p in peers:
        head += [p, f"{p} ÷ holdoff"]
    out = ["| " + " | ".join(head) + " |", "|---|---|---:|" + "---:|---:|" * len(peers)]
    for op in ops:
        unit = next(s[op]["unit"] for s in subjects.values() if op in s)
        row = [f"`{op}`", unit, cell(ours.get(op))]
        for p in peers:
            row += [cell(subjects[p].get(op)), ratio(subjects[p].get(op), ours.get(op))]
        out.append("| " + " | ".join(row) + " |")
    return out + floor


def reps_text(subjects: dict) -> str:
    n = sorted({len(r["samples"]) for s in subjects.values() for r in s.values()})
    return f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"


def summary(data: dict, langs: dict, machine: dict) -> list[str]:
    order = machine.get("langs", " ".join(LANGS)).split()
    order += [lang for lang in data if lang not in order]
    lines = [
        f"Run of {machine.get('date', '?')} on {machine.get('nproc', '?')} cores "
        f"({machine.get('cpu', '?')}, {machine.get('mem_gib', '?')} GiB, {machine.get('kernel', '?')}, "
        f"{machine.get('rustc', '?')}). Load average (1, 5, 15 min) {machine.get('load_before', '?')} before, "
        f"{machine.get('load_after', '?')} after. Took {machine.get('total_s', '?')} s: "
        f"builds {machine.get('build_s', '?')} s, benchmarks {machine.get('runs_s', '?')} s.",
        "",
        "Each cell: median [min, max] over the repetitions (each repetition times one batch of calls). "
        "**peer ÷ holdoff** is the peer's median divided by holdoff's median in the same language "
        "and run: 4.8× means the peer takes 4.8 times as long (or as many bytes) as holdoff; below "
        "1× holdoff is the slower or larger one. \"—\": not measured (the subject has no such "
        "operation, or the language wrote no record). A language whose run shared the machine with "
        f"other work (other processes using more than {LOADED_CORES} of a core on average, from "
        "/proc/stat) is marked **loaded**: its absolute figures are inflated, its ratios less so.",
    ]
    for lang in order:
        acc = langs.get(lang, {})
        subjects = data.get(lang)
        lines += ["", f"#### {LANG_NAMES.get(lang, lang)}", ""]
        noise = ""
        if acc:
            other = float(acc.get("other_cores") or 0)
            mark = f" **loaded** ({other:.2f} cores used by other processes on average)" if other > LOADED_CORES else f" quiet (other processes: {other:.2f} cores)"
            noise = (
                f"Ran {acc.get('wall_s')} s (builds in its run.sh included) from {acc.get('started')} UTC; "
                f"load average {acc.get('load_before')} → {acc.get('load_after')};{mark}."
            )
        if not subjects:
            rc = acc.get("rc") if acc else None
            why = "not run" if rc is None else "timed out" if rc in ("124", "137") else f"exit status {rc}"
            lines += [f"— (no records; {why}). {noise}".rstrip()]
            continue
        lines += [f"Peers: {peer_versions(subjects)}. {reps_text(subjects)} repetitions. {noise}".rstrip(), ""]
        lines += lang_table(lang, subjects)
    return lines


def details(data: dict) -> list[str]:
    lines = ["", "## What each figure measured", ""]
    for lang, subjects in data.items():
        lines += [f"### {LANG_NAMES.get(lang, lang)}", ""]
        for subject, ops in subjects.items():
            for op, r in ops.items():
                lines.append(f"- {subject} `{op}`: {r['note'] or '(no note)'}")
        lines.append("")
    return lines


def coverage(data: dict, order: list[str]) -> list[str]:
    """Standard ops holdoff did not record, per language (what a reader might look for)."""
    expected = ["allow_record", "refuse_open", "budget_429", "protected_call"]
    out = []
    for lang in order:
        ours = data.get(lang, {}).get("holdoff", {})
        if lang in data:
            missing = [op for op in expected if op not in ours]
            if missing:
                out.append(f"{lang}: holdoff has no {', '.join(missing)}")
            if len(data[lang]) == 1:
                out.append(f"{lang}: no peer recorded")
    return out


def chart(data: dict, order: list[str], path: Path, title: str, loaded: set[str] = frozenset()) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warn("matplotlib is not installed: no chart")
        return False
    langs = [lang for lang in order if any(op in s for s in data.get(lang, {}).values() for op in CHART_OPS)]
    if not langs:
        warn("no per-call timings: no chart")
        return False
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "holdoff-bench", "font.size": 9})
    fig, axes = plt.subplots(len(langs), 1, figsize=(12, 2.9 * len(langs)), squeeze=False)
    for ax, lang in zip(axes[:, 0], langs):
        subjects = data[lang]
        names = sorted(subjects, key=lambda s: s != "holdoff")  # holdoff first: same colour everywhere
        ops = [op for op in CHART_OPS if any(op in s for s in subjects.values())]
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            xs, meds, lo, hi = [], [], [], []
            for j, op in enumerate(ops):
                r = subjects[name].get(op)
                if r is None:
                    continue
                m, a, b = stats(r)
                xs.append(j - 0.4 + width * (i + 0.5))
                meds.append(m)
                lo.append(m - a)
                hi.append(b - m)
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=name, edgecolor="black",
                   linewidth=1.2 if name == "holdoff" else 0.4)
        ax.set_yscale("log")
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels(ops)
        ax.set_ylabel("ns per op (log)")
        mark = " (LOADED machine: absolute figures inflated)" if lang in loaded else ""
        ax.set_title(f"{LANG_NAMES.get(lang, lang)}: median, bars from min to max{mark}", loc="left")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.suptitle(title, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / len(langs) / 2.9))
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return True


def update_doc(doc: Path, block: str) -> None:
    """Replaces what stands between the markers of `doc` (appended at its end when missing)."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Performance\n"
    # Each marker stands on a line of its own, so that prose may name them.
    start = re.search(rf"^{re.escape(START)}$", text, re.M)
    end = re.search(rf"^{re.escape(END)}$", text, re.M)
    if start and end and start.start() < end.start():
        head, tail = text[: start.start()], text[end.end() :]
    else:
        warn(f"no {START} ... {END} markers in {doc}: adding the tables at the end")
        head, tail = text.rstrip("\n") + "\n\n", "\n"
    new = f"{head}{START}\n{block}\n{END}{tail}"
    if new != text:
        tmp = doc.with_suffix(".md.tmp")
        tmp.write_text(new, encoding="utf-8")
        os.replace(tmp, doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, required=True)
    ap.add_argument("--langs", type=Path, required=True)
    ap.add_argument("--machine", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--doc", type=Path, help="a Markdown file whose marked block gets the tables")
    a = ap.parse_args()

    data, problems = load_records(a.raw)
    langs = read_tsv(a.langs)
    machine = read_machine(a.machine)
    order = machine.get("langs", " ".join(LANGS)).split()
    for p in problems:
        warn(p)
    gaps = coverage(data, order)

    block = summary(data, langs, machine)
    loaded = {lang for lang, acc in langs.items() if float(acc.get("other_cores") or 0) > LOADED_CORES}
    has_chart = chart(
        data, order, a.out / "chart.svg", f"holdoff vs peers, per-call cost, {machine.get('date', '')}", loaded
    )
    if not has_chart:
        (a.out / "chart.svg").unlink(missing_ok=True)  # never leave an older run's chart beside
    md = ["# holdoff cross-language benchmark", "", "Written by `bash bench/run` (`make bench`); raw samples in results.jsonl.", ""]
    md += block + ([] if not has_chart else ["", f"![{CHART_ALT}](chart.svg)"])
    if problems or gaps:
        md += ["", "## Gaps and problems in the records", ""] + [f"- {p}" for p in problems + gaps]
    md += details(data)
    (a.out / "results.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    run = {
        "machine": machine,
        "languages": langs,
        "records": sum(len(ops) for s in data.values() for ops in s.values()),
        "problems": problems,
        "gaps": gaps,
        "loaded_threshold_cores": LOADED_CORES,
    }
    (a.out / "run.json").write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    if a.doc:
        if has_chart:
            # The link is relative to the document, wherever it lives.
            rel = Path(os.path.relpath(a.out.resolve() / "chart.svg", a.doc.resolve().parent)).as_posix()
            block += ["", f"![{CHART_ALT}]({rel})"]
        update_doc(a.doc, "\n".join(block))
    print("\n".join(block))
    return 0


if __name__ == "__main__":
    sys.exit(main())
