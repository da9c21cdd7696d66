"""A throwaway ``redis-server`` on a unix socket in a temporary directory, for the fleet test.

Never the system service: the server is this process's child, listens on no TCP port
(``--port 0``), keeps nothing on disk (``--save '' --appendonly no``) and is stopped by
:meth:`RedisServer.stop`. :meth:`kill` (SIGKILL, as a crash) and :meth:`start` again bring it
back on the same socket, empty. ``python3 redis_server.py`` starts one, pings it, restarts it
and stops it (a self-check).

The file is not named ``redis.py`` so that it never shadows the ``redis`` client package for a
program started from this directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import BinaryIO

READY_TIMEOUT_S = 5.0


class RedisError(RuntimeError):
    pass


def _encode(args: tuple[str, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_reply(f: BinaryIO) -> object:
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise RedisError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise RedisError(f"unexpected reply {line!r}")


class RedisServer:
    """One ``redis-server`` child on ``<tempdir>/redis.sock``; ``url`` is ``unix://<path>``."""

    def __init__(self, binary: str = "redis-server") -> None:
        found = shutil.which(binary)
        if not found:
            raise RedisError(
                f"{binary} not found: sudo apt-get install -y redis-server (scripts/install-deps)"
            )
        self.binary = found
        self.dir = tempfile.mkdtemp(prefix="holdoff-fleet-redis-")
        self.socket = os.path.join(self.dir, "redis.sock")
        self.log = os.path.join(self.dir, "redis.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            raise RedisError("already running")
        args = [
            self.binary,
            "--port",
            "0",
            "--unixsocket",
            self.socket,
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--logfile",
            self.log,
            "--daemonize",
            "no",
        ]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.starts += 1
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                if self.command("PING") == "PONG":
                    return
            except (OSError, RedisError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RedisError(f"redis-server did not start; log {self.log}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: a crash, no clean shutdown; the socket file may stay behind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def command(self, *args: str, timeout: float = 1.0) -> object:
        """One command on a fresh connection; the reply decoded (str, int, list, None)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket)
            s.sendall(_encode(args))
            with s.makefile("rb") as f:
                return _read_reply(f)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    r = RedisServer()
    try:
        r.start()
        r.command("SET", "k", "v")
        assert r.command("GET", "k") == "v"
        r.kill()
        r.start()
        assert r.command("GET", "k") is None, "a restart comes back empty"
        assert r.command("KEYS", "*") == []
        print(f"redis ok: {r.url}, started {r.starts} times")
    finally:
        r.cleanup()
