#!/usr/bin/env python3
"""A fault-injecting HTTP upstream for the multi-process fleet test (stdlib only).

    upstream.py --script JSON [--hold] [--port-file PATH]

Listens on 127.0.0.1 on a free port, written to ``--port-file`` (atomically) and printed as
``port N`` on stdout. Every path except the ``/__`` ones is the upstream: its answer comes from
the script, a JSON list of phases ``{"until_ms": T, "status": S, "retry_after_s": R,
"delay_ms": D}`` in order; a request is answered by the first phase whose ``until_ms`` (ms since
the phase clock started) is above its arrival time; the last phase may omit ``until_ms``.
``retry_after_s`` (integer seconds) adds a ``Retry-After`` header; ``delay_ms`` sleeps before
answering; ``workers`` (a list of worker ids) limits the phase's answer to those workers, the
others getting 200 (a fault only one worker sees). Without ``--hold`` the phase clock starts with the server; with it, every request
is answered 200 (phase ``"warmup"``) until ``POST /__start``.

Every upstream request is recorded: the worker id (header ``X-Worker-Id``), the status sent,
``t`` (ms on the monotonic clock since the phase clock started, null before it, for
comparisons within this process) and ``wall`` (Unix epoch ms, ``time.time()``, for comparisons
with the workers, which run in other processes: on one machine they share the real-time clock).

Control endpoints: ``GET /__seen`` -> ``{"workers": [ids...]}``; ``POST /__start``;
``GET /__stats`` -> ``{"start_wall": ms | null, "script": [...], "requests": [{"t", "wall",
"worker", "status", "phase"}...]}`` in arrival order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORKER_HEADER = "X-Worker-Id"


def _validate(script: object) -> list[dict[str, int]]:
    if not isinstance(script, list) or not script:
        raise ValueError("script: a non-empty JSON list of phases")
    last = -1
    for i, phase in enumerate(script):
        if not isinstance(phase, dict) or not isinstance(phase.get("status"), int):
            raise TypeError(f"script[{i}]: an object with an integer status")
        unknown = set(phase) - {"until_ms", "status", "retry_after_s", "delay_ms", "workers"}
        if unknown:
            raise ValueError(f"script[{i}]: unknown keys {sorted(unknown)}")
        until = phase.get("until_ms")
        if until is None and i != len(script) - 1:
            raise ValueError(f"script[{i}].until_ms: only the last phase may omit it")
        if until is not None and (not isinstance(until, int) or until <= last):
            raise ValueError(f"script[{i}].until_ms: an integer above the previous phase's")
        workers = phase.get("workers")
        if workers is not None and not (
            isinstance(workers, list) and all(isinstance(w, str) for w in workers)
        ):
            raise TypeError(f"script[{i}].workers: a list of worker ids (strings)")
        last = until if until is not None else last
    return script


class Upstream:
    """The scripted answers and the request log, shared by the handler threads."""

    def __init__(self, script: list[dict[str, int]], hold: bool) -> None:
        self.script = script
        self.lock = threading.Lock()
        self.requests: list[dict[str, object]] = []
        self.seen: set[str] = set()
        self.origin = time.monotonic()
        self.start_wall: float | None = None if hold else time.time() * 1000.0

    def start(self) -> None:
        with self.lock:
            if self.start_wall is None:
                self.origin = time.monotonic()
                self.start_wall = time.time() * 1000.0

    def answer(self, worker: str) -> tuple[dict[str, int], int | None]:
        """The answer (a phase) and the phase's index (None in warmup) for a request arriving
        now from ``worker``; records the request."""
        wall = time.time() * 1000.0
        with self.lock:
            t: float | None = None
            if self.start_wall is None:
                phase, index = {"status": 200}, None
            else:
                t = (time.monotonic() - self.origin) * 1000.0
                index = next(
                    (i for i, p in enumerate(self.script) if p.get("until_ms", t + 1) > t),
                    len(self.script) - 1,
                )
                phase = self.script[index]
                if "workers" in phase and worker not in phase["workers"]:
                    phase = {"status": 200}
            self.seen.add(worker)
            self.requests.append(
                {
                    "t": None if t is None else round(t, 3),
                    "wall": round(wall, 3),
                    "worker": worker,
                    "status": phase["status"],
                    "phase": index,
                }
            )
        return phase, index

    def stats(self) -> dict[str, object]:
        with self.lock:
            return {
                "start_wall": self.start_wall,
                "script": self.script,
                "requests": list(self.requests),
            }


def make_handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection per worker
        # The headers and the body go out in two writes: without TCP_NODELAY the second waits
        # for the client's delayed ACK (40 ms), which would swamp the staleness figure.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, value: object) -> None:
            self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def do_GET(self) -> None:
            if self.path == "/__stats":
                return self._json(upstream.stats())
            if self.path == "/__seen":
                with upstream.lock:
                    return self._json({"workers": sorted(upstream.seen)})
            phase, _ = upstream.answer(self.headers.get(WORKER_HEADER, ""))
            if phase.get("delay_ms"):
                time.sleep(phase["delay_ms"] / 1000.0)
            headers = {}
            if phase.get("retry_after_s") is not None:
                headers["Retry-After"] = str(phase["retry_after_s"])
            self._send(phase["status"], b"%d\n" % phase["status"], headers)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            if self.path == "/__start":
                upstream.start()
                return self._json({"start_wall": upstream.start_wall})
            self._send(404, b"not found\n")

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", required=True, help="JSON list of phases")
    parser.add_argument("--hold", action="store_true", help="start the phases on POST /__start")
    parser.add_argument("--port-file", help="write the port here once listening")
    args = parser.parse_args()
    try:
        script = _validate(json.loads(args.script))
    except (ValueError, TypeError) as e:
        print(f"upstream.py: {e}", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(Upstream(script, args.hold)))
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"port {port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
