"""Long-lived helper processes of a run: the bench upstream and the load generator.

Both inherit the driver's CPU affinity (the client cores) and run in their own process
group, so stopping them never touches anything else.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import procs
from bench.gateway import http_status

ROOT = Path(__file__).resolve().parent.parent


class ChildFailed(Exception):
    """A helper process did not start, answer in time, or answer sensibly."""


def readline(proc: subprocess.Popen[str], timeout: float) -> str:
    """One stdout line, or "" when none arrives within ``timeout`` seconds."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return proc.stdout.readline().strip()


class Upstream:
    """The bench upstream, reconfigured through /_bench/settings between scenarios."""

    def __init__(self, log_dir: Path) -> None:
        self.log = log_dir / "upstream.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.upstream", "--port", "0"],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=self.log.open("ab"),
            start_new_session=True,
        )
        line = readline(self.proc, 15.0)
        if not line.startswith("listening "):
            procs.stop(self.proc)
            raise ChildFailed(f"bench upstream did not start: {line!r}\n{procs.tail(self.log)}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def configure(self, *, chunks: int, delay_ms: float, gap_ms: float = 0.0) -> None:
        body = json.dumps({"chunks": chunks, "delay_ms": delay_ms, "gap_ms": gap_ms}).encode()
        answer = http_status("127.0.0.1", self.port, "PUT", "/_bench/settings", body=body)
        if answer is None or answer[0] != 200:
            raise ChildFailed(f"could not configure the bench upstream: {answer}")

    def stats(self) -> dict[str, int]:
        answer = http_status("127.0.0.1", self.port, "GET", "/_bench/stats")
        return json.loads(answer[2]) if answer and answer[0] == 200 else {}

    def stop(self) -> None:
        procs.stop(self.proc)


class LoadgenWorker:
    """``python -m bench.loadgen --serve``: one warm process, one round per request.

    A worker that overruns or dies is killed and replaced on the next round.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log = log_dir / "loadgen.log"
        self.proc: subprocess.Popen[str] | None = None
        self._ensure()  # pay the interpreter start-up now, outside any measured window

    def _ensure(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.stop()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.loadgen", "--serve"],
                cwd=ROOT,
                text=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log.open("ab"),
                start_new_session=True,
            )
            if readline(self.proc, 30.0) != "ready":
                self.stop()
                raise ChildFailed(f"load generator did not start:\n{procs.tail(self.log)}")
        return self.proc

    def start(self, argv: list[str]) -> None:
        """Send one round; it begins as soon as the worker reads the line."""
        proc = self._ensure()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(argv) + "\n")
            proc.stdin.flush()
        except BrokenPipeError as exc:
            self.stop()
            raise ChildFailed(f"load generator died:\n{procs.tail(self.log)}") from exc

    def result(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None
        line = readline(self.proc, timeout)
        if not line:
            self.stop()
            raise ChildFailed(
                f"load generator gave no result in {timeout:.0f} s:\n{procs.tail(self.log)}"
            )
        result: dict[str, Any] = json.loads(line)
        if "failed" in result:
            raise ChildFailed(f"load generator refused the round: {result['failed']}")
        return result

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None
