"""Process plumbing for the driver: spawn, pin, account, stop. Linux ``/proc`` only.

CPU time is read from ``/proc/<pid>/stat`` (utime + stime of the whole thread group,
in clock ticks, usually 10 ms) — the process's own accounting, not a sampler — and
peak RSS from ``VmHWM`` in ``/proc/<pid>/status``. Pinning uses
``os.sched_setaffinity`` on every thread of a process, so threads started before the
call (a daphne thread pool, say) are pinned too.
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (all its threads)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (granian serves from a worker process it forks)."""
    found: list[int] = []
    queue = [pid]
    while queue:
        parent = queue.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                queue.append(child)
    return found


def memory_kb(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) in kB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


def allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return "?"


def pin(pid: int, cpus: set[int] | None) -> bool:
    """Pin every thread of ``pid`` to ``cpus``; False when the OS refuses or it is gone."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    ok = True
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            ok = False
    return ok


def plan_cpus() -> tuple[set[int] | None, set[int] | None]:
    """(gateway cpus, client cpus): gateway on the first usable core, the rest for us.

    With a single usable core nothing is pinned: everything shares it, and the report
    says so.
    """
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(usable) < 2:
        return None, None
    return {usable[0]}, set(usable[1:])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def reuseport_sockets(count: int) -> tuple[int, list[socket.socket]]:
    """``count`` listening sockets on one port with SO_REUSEPORT (kernel balances them)."""
    sockets: list[socket.socket] = []
    port = 0
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
        sock.set_inheritable(True)
        port = sock.getsockname()[1]
        sockets.append(sock)
    return port, sockets


def spawn(
    cmd: Sequence[str],
    *,
    log: Path,
    cpus: set[int] | None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Iterable[int] = (),
    stdout_pipe: bool = False,
) -> subprocess.Popen[str]:
    """Start ``cmd`` in its own process group, output to ``log``, pinned to ``cpus``."""
    out = log.open("ab")
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout_pipe else out,
        stderr=out,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
    )
    out.close()
    pin(proc.pid, cpus)
    return proc


def stop(proc: subprocess.Popen[str], timeout: float = 5.0) -> None:
    """SIGTERM the process group we started, SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)
    except ProcessLookupError:
        pass


def run_checked(
    cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd),
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_jiffies() -> dict[str, int]:
    """Aggregate ``cpu`` line of /proc/stat: total and steal jiffies (noisy-neighbour check)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return {"total": sum(fields[:8]), "steal": fields[7] if len(fields) > 7 else 0}


def core_jiffies(cpus: set[int] | None) -> tuple[int, int]:
    """(busy, total) jiffies summed over ``cpus`` from the per-core lines of /proc/stat.

    Busy minus the gateway's own ticks is what other processes took from the gateway's
    core: the report shows it so a reader can tell a slow gateway from a crowded core.
    """
    busy = total = 0
    if not cpus:
        return 0, 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            fields = [int(x) for x in rest.split()[:8]]
            total += sum(fields)
            busy += sum(fields) - fields[3] - fields[4]  # minus idle and iowait
    return busy, total


def machine_info() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "nproc": str(os.cpu_count()),
        "usable_cpus": ",".join(map(str, sorted(os.sched_getaffinity(0)))),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
