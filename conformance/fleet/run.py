#!/usr/bin/env python3
"""The multi-process fleet test: N worker processes of one language share one breaker on a real
Redis and call a fault-injecting upstream; the upstream's log and the workers' reports prove
the fleet's promises.

    run.py <lang> [--workers N] [--warmup-ms MS] [--exit-bound-ms MS] [--keep] -- <worker command...>

The worker contract (environment, breaker configuration, what to write) is README.md beside
this file. The driver starts ``redis-server`` (redis_server.py: a unix socket in a temporary
directory, never the system service) and the upstream (upstream.py), spawns the workers, waits
until the upstream has seen every worker, then starts the upstream's script (make_script,
ms since its start) and kills Redis and restarts it on cue. It waits for the workers with a hard
deadline (a hung worker is killed and reported), then asserts:

(a) fleet-wide probing: in each outage phase while the fleet is attached, the requests reaching
    the upstream later than GRACE_MS after the phase's first 503 are at most one probe per open
    interval for the whole fleet (floor(window / OPEN_INTERVAL_MS) + 1, + PROBE_MARGIN), where
    N local breakers would send about N per interval;
(b) Retry-After: no request arrives later than GRACE_MS after a 429 and before the Retry-After
    that 429 named;
(c) staleness: for each worker and each attached fault phase, its first refusal minus the
    arrival of the phase's first 503/429 at the upstream; p99 < STALENESS_P99_MS. A 429 goes to
    one worker only, so the others' figures are the fleet's propagation alone (in an outage
    every worker may trip on its own 503). The figure includes the worker's loop granularity
    (README: up to 10 ms of pause after a 200);
(d) Redis killed and restarted: each worker reports calls started == calls ended and no error,
    no breaker call took longer than SLOWEST_BREAKER_CALL_MS, each exits by RUN_MS +
    exit bound; while Redis is down the outage is still held off per worker (local fallback);
    after the restart Redis holds the fleet's key again and (a) holds again;
(e) recovery: at the end of each recovery phase after an attached fault phase, every worker
    gets 200s again (the fleet closed).

Clocks: the workers are separate processes, so times crossing a process boundary (a worker's
refusal versus the upstream's first fault) are Unix epoch milliseconds from the real-time clock
(``time.time()``, ``Date.now()``, ``System.currentTimeMillis()``...), which every process on one
machine reads alike (a monotonic clock's origin is per process in most runtimes). Times compared
within the upstream use its monotonic clock. An NTP step during the run would skew (c) only.

The last line is ``fleet <lang>: N workers, U upstream requests (open: P probes), B before
Retry-After, staleness p99 X ms, redis restart ok``; the exit status is 1 on any failed
assertion (each printed as ``FAIL: ...``), 2 on bad usage or a missing redis-server.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from redis_server import RedisError, RedisServer

# The breaker every worker builds (README.md): one failure trips it, a constant open interval.
OPEN_INTERVAL_MS = 500
# A request reaching the upstream within this long after a fault is excused in (a) and (b):
# requests already in flight, and workers still learning of the open. It bounds the worst
# worker, where (c) bounds the p99; it is generous for a loaded 2-core machine.
GRACE_MS = 250
PROBE_MARGIN = 1
# Staleness: the target (docs/fleet.md) is a p99 under 100 ms on this machine, measured and
# printed on every run. The run fails above the bound (GRACE_MS), the time (a) and (b) already
# excuse: an idle 2-core machine measures 10-70 ms, but 6 worker processes, Redis and the
# upstream sharing 2 cores with other jobs have measured up to 117 ms, and a timed test must not
# fail on scheduler noise.
STALENESS_TARGET_P99_MS = 100.0
STALENESS_P99_MS = float(GRACE_MS)
# allow() and record() never wait on Redis; this bounds scheduler noise on a busy machine.
SLOWEST_BREAKER_CALL_MS = 200.0
# Allowed error when comparing a request's arrival with a Retry-After deadline: the store's
# and each worker's clocks are converted through offsets measured in round trips.
CLOCK_TOLERANCE_MS = 2.0
# The last part of a recovery phase in which every worker must get a 200 again.
RESUME_WINDOW_MS = 400


# The upstream's phases (ms since its script started; README.md) and what each one proves:
# "attached" (a) for a 503, (b) for a 429, and (c); "local": each worker alone holds off the
# outage while Redis is down; "resume" (e). A 429 goes to one worker only (the others get 200):
# the others can learn of it only through the fleet, so their refusals measure its staleness.
def make_script(n: int) -> list[tuple[dict, str | None]]:
    last = str(n - 1)
    return [
        ({"until_ms": 1000, "status": 200}, None),
        ({"until_ms": 3500, "status": 503}, "attached"),
        ({"until_ms": 5500, "status": 200}, "resume"),
        ({"until_ms": 7000, "status": 429, "retry_after_s": 1, "workers": ["0"]}, "attached"),
        ({"until_ms": 9000, "status": 200}, "resume"),  # Redis killed at its end
        ({"until_ms": 9500, "status": 200}, None),  # Redis down
        ({"until_ms": 11000, "status": 503}, "local"),  # Redis down
        ({"until_ms": 14000, "status": 200}, None),  # Redis restarted at 12000
        ({"until_ms": 16500, "status": 503}, "attached"),
        ({"until_ms": 18500, "status": 200}, "resume"),
        ({"until_ms": 20000, "status": 429, "retry_after_s": 1, "workers": [last]}, "attached"),
        ({"until_ms": 22000, "status": 200}, "resume"),
    ]


REDIS_KILL_AT_MS = 9000
REDIS_RESTART_AT_MS = 12000
# The workers run this long past the script's end, so the last phase is fully observed.
TAIL_MS = 500


def phase_bounds(script: list[dict], index: int) -> tuple[int, int]:
    start = script[index - 1]["until_ms"] if index > 0 else 0
    return start, script[index]["until_ms"]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def http_json(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.load(res)


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lang = args.lang
        self.n = args.workers
        self.dir = tempfile.mkdtemp(prefix=f"holdoff-fleet-{self.lang}-")
        self.key = f"holdoff-fleet-test-{self.lang}-{os.getpid()}-{secrets.token_hex(4)}"
        planned = make_script(self.n)
        self.script = [phase for phase, _ in planned]
        self.checks = {i: check for i, (_, check) in enumerate(planned) if check}
        self.script_end_ms = self.script[-1]["until_ms"]
        self.run_ms = args.warmup_ms + self.script_end_ms + TAIL_MS
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.redis: RedisServer | None = None
        self.upstream: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    def fail(self, message: str) -> None:
        self.failures.append(message)
        print(f"FAIL: {message}", flush=True)

    # --- processes -------------------------------------------------------------------------

    def start_upstream(self) -> str:
        port_file = os.path.join(self.dir, "upstream.port")
        with open(os.path.join(self.dir, "upstream.err"), "wb") as err:
            self.upstream = subprocess.Popen(
                [
                    sys.executable,
                    os.path.join(HERE, "upstream.py"),
                    "--hold",
                    "--port-file",
                    port_file,
                    "--script",
                    json.dumps(self.script),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file):
            if self.upstream.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the upstream did not start (upstream.err)")
            time.sleep(0.02)
        with open(port_file) as f:
            return f"http://127.0.0.1:{int(f.read())}"

    def spawn_workers(self, upstream_url: str) -> None:
        for i in range(self.n):
            env = dict(
                os.environ,
                HOLDOFF_FLEET_URL=self.redis.url,
                HOLDOFF_FLEET_KEY=self.key,
                UPSTREAM_URL=upstream_url,
                WORKER_ID=str(i),
                RUN_MS=str(self.run_ms),
                OUT=os.path.join(self.dir, f"worker-{i}.json"),
            )
            out_path = os.path.join(self.dir, f"worker-{i}.out")
            with open(out_path, "wb") as out, open(out_path[:-3] + "err", "wb") as err:
                self.workers.append(
                    subprocess.Popen(
                        self.args.command,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,  # its own process group: a hard kill reaches its children
                    )
                )

    def wait_all_seen(self, upstream_url: str) -> bool:
        deadline = time.monotonic() + self.args.warmup_ms / 1000.0
        want = {str(i) for i in range(self.n)}
        while time.monotonic() < deadline:
            seen = set(http_json(f"{upstream_url}/__seen")["workers"])
            if want <= seen:
                return True
            if any(w.poll() is not None for w in self.workers):
                break
            time.sleep(0.05)
        missing = sorted(want - set(http_json(f"{upstream_url}/__seen")["workers"]), key=int)
        self.fail(
            f"workers {missing} made no request within --warmup-ms {self.args.warmup_ms} "
            "(exited early, or slow to start)"
        )
        return False

    def fleet_keys(self) -> list[str]:
        keys = self.redis.command("KEYS", "*")
        return [k for k in keys if self.key in k]

    def run_script(self, started: float) -> None:
        """Kills Redis and restarts it on cue (ms since the upstream's script started)."""

        def sleep_until(ms: int) -> None:
            time.sleep(max(0.0, started + ms / 1000.0 - time.monotonic()))

        sleep_until(REDIS_KILL_AT_MS)
        keys = self.fleet_keys()
        if not keys:
            self.fail(
                f"before the kill, Redis holds no key naming the fleet key {self.key}: "
                "the workers never wrote the shared record"
            )
        self.redis.kill()
        sleep_until(REDIS_RESTART_AT_MS)
        self.redis.start()
        sleep_until(self.script_end_ms)

    def wait_workers(self, spawned: float) -> list[float | None]:
        """Each worker's exit time in ms after its spawn; None if killed at the deadline."""
        deadline = spawned + (self.run_ms + self.args.exit_bound_ms) / 1000.0
        exits: list[float | None] = [None] * self.n
        while True:
            now = time.monotonic()
            for i, w in enumerate(self.workers):
                if exits[i] is None and w.poll() is not None:
                    exits[i] = (now - spawned) * 1000.0
            if all(e is not None for e in exits) or now > deadline:
                break
            time.sleep(0.02)
        for i, w in enumerate(self.workers):
            if w.poll() is None:
                self.fail(
                    f"worker {i} still running {self.args.exit_bound_ms} ms after RUN_MS "
                    f"({self.run_ms} ms): hung, killed"
                )
                os.killpg(w.pid, signal.SIGKILL)
                w.wait()
        return exits

    def cleanup(self) -> None:
        for w in self.workers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait()
        if self.upstream is not None and self.upstream.poll() is None:
            self.upstream.terminate()
            self.upstream.wait(timeout=10)
        if self.redis is not None:
            self.redis.cleanup()

    # --- assertions ------------------------------------------------------------------------

    def check_workers(self, exits: list[float | None]) -> list[dict | None]:
        reports: list[dict | None] = []
        for i, w in enumerate(self.workers):
            report = None
            path = os.path.join(self.dir, f"worker-{i}.json")
            if w.returncode != 0:
                self.fail(f"worker {i} exited with status {w.returncode}")
            try:
                with open(path) as f:
                    report = json.load(f)
            except (OSError, ValueError) as e:
                self.fail(f"worker {i}: no readable OUT report ({e})")
            if report is not None:
                started, ended = report.get("calls_started"), report.get("calls_ended")
                if not isinstance(started, int) or started != ended or started <= 0:
                    self.fail(f"worker {i}: calls started {started} != calls ended {ended}")
                if report.get("errors") != 0:
                    self.fail(
                        f"worker {i}: {report.get('errors')} errors (transport or unexpected)"
                    )
                slowest = report.get("slowest_breaker_call_ms")
                if not isinstance(slowest, (int, float)) or slowest > SLOWEST_BREAKER_CALL_MS:
                    self.fail(
                        f"worker {i}: slowest allow()/record() took {slowest} ms "
                        f"(bound {SLOWEST_BREAKER_CALL_MS:.0f} ms)"
                    )
            if exits[i] is not None and exits[i] > self.run_ms + self.args.exit_bound_ms:
                self.fail(f"worker {i} exited {exits[i]:.0f} ms after spawn, over RUN_MS + bound")
            reports.append(report)
        return reports

    def analyse(self, stats: dict, reports: list[dict | None]) -> dict[str, object]:
        start_wall = stats["start_wall"]
        reqs = [r for r in stats["requests"] if r["t"] is not None]
        by_phase: dict[int, list[dict]] = {}
        for r in reqs:
            by_phase.setdefault(r["phase"], []).append(r)
        probes = 0
        local_equivalent = 0
        staleness: list[float] = []
        propagation: list[float] = []  # the phases whose fault only one worker saw
        for index, check in sorted(self.checks.items()):
            start, end = phase_bounds(self.script, index)
            in_phase = by_phase.get(index, [])
            if check == "resume":
                tail = [
                    r for r in in_phase if r["t"] >= end - RESUME_WINDOW_MS and r["status"] == 200
                ]
                quiet = sorted(
                    {str(i) for i in range(self.n)} - {r["worker"] for r in tail}, key=int
                )
                if quiet:
                    self.fail(
                        f"phase {index} ({start}-{end} ms): workers {quiet} got no 200 in the "
                        f"last {RESUME_WINDOW_MS} ms: the fleet did not close"
                    )
                continue
            faults = [r for r in in_phase if r["status"] != 200]
            if not faults:
                self.fail(f"phase {index} ({start}-{end} ms): no request reached the upstream")
                continue
            first = faults[0]
            window = end - (first["t"] + GRACE_MS)
            late = [r for r in in_phase if r["t"] > first["t"] + GRACE_MS]
            per_interval = math.floor(window / OPEN_INTERVAL_MS) + 1
            if check == "local":
                for w in range(self.n):
                    mine = [r for r in late if r["worker"] == str(w)]
                    if len(mine) > per_interval + PROBE_MARGIN:
                        self.fail(
                            f"phase {index} (Redis down): worker {w} sent {len(mine)} requests "
                            f"in {window:.0f} ms of outage; its local breaker allows "
                            f"{per_interval} + {PROBE_MARGIN}"
                        )
                continue
            if first["status"] == 503:
                probes += len(late)
                local_equivalent += self.n * math.floor(window / OPEN_INTERVAL_MS)
                if len(late) > per_interval + PROBE_MARGIN:
                    self.fail(
                        f"phase {index} ({start}-{end} ms): {len(late)} requests reached the "
                        f"upstream in {window:.0f} ms while the fleet was open; one probe per "
                        f"{OPEN_INTERVAL_MS} ms fleet-wide allows {per_interval} + "
                        f"{PROBE_MARGIN} (workers: {[r['worker'] for r in late]})"
                    )
            # (c): each worker's first refusal after the phase's first fault.
            trip_wall = first["wall"]
            phase_start_wall, phase_end_wall = start_wall + start, start_wall + end
            targeted = self.script[index].get("workers", [])
            for w, report in enumerate(reports):
                if report is None or str(w) in targeted:
                    continue
                refusals = [
                    r
                    for r in report.get("refusal_starts", [])
                    if phase_start_wall <= r < phase_end_wall
                ]
                if not refusals:
                    self.fail(
                        f"phase {index}: worker {w} was never refused: it never learned the "
                        "fleet was open"
                    )
                    continue
                staleness.append(max(0.0, refusals[0] - trip_wall))
                if targeted:
                    propagation.append(staleness[-1])
        # (b): no request before a Retry-After once the fleet knows of it.
        early = []
        for r429 in (r for r in reqs if r["status"] == 429):
            retry_after_ms = self.script[r429["phase"]]["retry_after_s"] * 1000
            known, until = r429["t"] + GRACE_MS, r429["t"] + retry_after_ms - CLOCK_TOLERANCE_MS
            early += [r for r in reqs if known < r["t"] < until]
        early_ids = {(r["t"], r["worker"]) for r in early}
        if early_ids:
            self.fail(
                f"{len(early_ids)} requests reached the upstream before a Retry-After the "
                f"fleet knew: {sorted(early_ids)[:10]}"
            )
        if not any(r["status"] == 429 for r in reqs):
            self.fail("no 429 was ever sent: the rate-limit phase proved nothing")
        return {
            "requests": len(reqs),
            "probes": probes,
            "local_equivalent": local_equivalent,
            "early": len(early_ids),
            "staleness": staleness,
            "propagation": propagation,
        }

    # --- main ------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self.redis = RedisServer()
            self.redis.start()
        except RedisError as e:
            print(f"run.py: {e}", file=sys.stderr)
            if self.redis is not None:
                self.redis.cleanup()
            shutil.rmtree(self.dir, ignore_errors=True)
            return 2
        try:
            upstream_url = self.start_upstream()
            spawned = time.monotonic()
            try:
                self.spawn_workers(upstream_url)
            except OSError as e:
                print(f"run.py: cannot start the worker command: {e}", file=sys.stderr)
                shutil.rmtree(self.dir, ignore_errors=True)
                return 2
            if self.wait_all_seen(upstream_url):
                http_json(f"{upstream_url}/__start", "POST")
                self.run_script(time.monotonic())
            exits = self.wait_workers(spawned)
            reports = self.check_workers(exits)
            if not self.fleet_keys():
                self.fail(
                    f"after the restart, Redis holds no key naming {self.key}: the workers "
                    "did not re-attach"
                )
            stats = http_json(f"{upstream_url}/__stats")
            if stats["start_wall"] is None:
                result = {
                    "requests": 0,
                    "probes": 0,
                    "local_equivalent": 0,
                    "early": 0,
                    "staleness": [],
                    "propagation": [],
                }
            else:
                result = self.analyse(stats, reports)
            with open(os.path.join(self.dir, "upstream-stats.json"), "w") as f:
                json.dump(stats, f)
        finally:
            self.cleanup()
        staleness = result["staleness"]
        p50 = percentile(staleness, 50) if staleness else float("nan")
        p99 = percentile(staleness, 99) if staleness else float("nan")
        if not staleness or not p99 < STALENESS_P99_MS:
            self.fail(
                f"staleness p99 {p99:.1f} ms over {len(staleness)} samples "
                f"(bound {STALENESS_P99_MS:.0f} ms)"
            )
        alone = result["propagation"]
        target = "met" if p99 < STALENESS_TARGET_P99_MS else "MISSED"
        print(
            f"fleet {self.lang}: staleness target p99 < {STALENESS_TARGET_P99_MS:.0f} ms {target} "
            f"(p99 {p99:.1f} ms; the run fails above {STALENESS_P99_MS:.0f} ms)"
        )
        print(
            f"fleet {self.lang}: staleness p50 {p50:.1f} ms, p99 {p99:.1f} ms over "
            f"{len(staleness)} samples (a 429 only one worker saw: max "
            f"{max(alone, default=float('nan')):.1f} ms over {len(alone)}); open-phase requests "
            f"{result['probes']} shared versus ~{result['local_equivalent']} for {self.n} local "
            "breakers"
        )
        if self.failures:
            self.print_worker_logs()
        if self.failures or self.args.keep:
            print(f"fleet {self.lang}: the run's files are in {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        restart = "redis restart ok" if not self.failures else "FAILED"
        print(
            f"fleet {self.lang}: {self.n} workers, {result['requests']} upstream requests "
            f"(open: {result['probes']} probes), {result['early']} before Retry-After, "
            f"staleness p99 {p99:.0f} ms, {restart}",
            flush=True,
        )
        return 1 if self.failures else 0

    def print_worker_logs(self) -> None:
        for i in range(len(self.workers)):
            path = os.path.join(self.dir, f"worker-{i}.err")
            try:
                with open(path, errors="replace") as f:
                    tail = f.read()[-2000:]
            except OSError:
                continue
            if tail.strip():
                print(f"--- worker {i} stderr (last 2000 chars) ---\n{tail}", flush=True)


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="run.py")
    parser.add_argument("lang", help="the language's name, for the summary")
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument(
        "--warmup-ms",
        type=int,
        default=5000,
        help="how long every worker may take to send its first request",
    )
    parser.add_argument(
        "--exit-bound-ms",
        type=int,
        default=5000,
        help="how long past RUN_MS (after its spawn) a worker may take to exit",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's files")
    args = parser.parse_args(argv[:cut])
    args.command = argv[cut + 1 :]
    if not args.command or args.workers < 2:
        parser.error("a worker command after --, and --workers >= 2")
    return Run(args).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
