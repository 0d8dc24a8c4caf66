"""Scenarios g and h (``--streams``): thousands of long streams open in one gateway process.

Per scenario the upstream is set to ``chunks`` content chunks ``gap_ms`` apart (200 x
100 ms: a 20 s stream), then one round per path, DIRECT first, each driven by one
``python -m bench.streams`` process on the client core (see that module). THROUGH gets a
fresh gateway, warmed with a second of short streams, then:

- *idle* RSS and open files are read before the first long stream;
- at the ``open`` line (every stream has its first content event) CPU, RSS and open files
  are read again; at ``steady_end`` (the first stream ends) CPU once more;
- CPU per relayed chunk = gateway CPU over that steady window / content events the client
  received in it (short calls and probes run in the window too, at a low rate);
- RSS per open stream = (RSS with N open - idle RSS) / N; files per stream likewise.

Added latency columns are THROUGH minus DIRECT of the same run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import procs
from bench.children import readline

if TYPE_CHECKING:
    from bench.run import BenchPath, Runner

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class StreamScenario:
    key: str
    streams: int
    chunks: int = 200
    gap_ms: float = 100.0
    ramp: float = 500.0  # streams opened per second
    short_rate: float = 10.0  # short calls per second beside them

    @property
    def title(self) -> str:
        return (
            f"{self.streams} concurrent streams, {self.chunks} chunks {self.gap_ms:g} ms apart, "
            f"opened at {self.ramp:g}/s; short calls at {self.short_rate:g}/s beside them"
        )


STREAM_SCENARIOS = {s.key: s for s in (StreamScenario("g", 2000), StreamScenario("h", 5000))}


@dataclass
class StreamRow:
    scenario: str
    path: str
    result: dict[str, Any] = field(default_factory=dict)
    unavailable: str | None = None


def open_files(pid: int) -> int:
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return 0


def open_file_limit(pid: int) -> int | None:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            value = line.split()[3]
            return int(value) if value.isdigit() else None
    return None


def _client(path: BenchPath, scenario: StreamScenario, log: Path) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "bench.streams",
        "--url",
        path.url,
        "--model",
        "fast" if path.gateway is None else "bench",
        "--key",
        path.key,
        "--streams",
        str(scenario.streams),
        "--chunks",
        str(scenario.chunks),
        "--gap-ms",
        str(scenario.gap_ms),
        "--ramp",
        str(scenario.ramp),
        "--short-rate",
        str(scenario.short_rate),
    ]
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=log.open("ab"),
        start_new_session=True,
    )


def run_round(runner: Runner, path: BenchPath, scenario: StreamScenario) -> dict[str, Any]:
    gateway = path.gateway
    pid = gateway.pids[0] if gateway else None
    marks: dict[str, dict[str, float]] = {}

    def mark(name: str) -> None:
        busy, ticks = procs.core_jiffies(runner.gateway_cpus)
        if pid is None or gateway is None or not gateway.alive():
            marks[name] = {"t": time.monotonic(), "core_busy": busy, "core_ticks": ticks}
            return
        marks[name] = {
            "t": time.monotonic(),
            "core_busy": busy,
            "core_ticks": ticks,
            "cpu": gateway.cpu_seconds(),
            "rss_mb": gateway.memory_mb()["rss"],
            "fds": open_files(pid),
        }

    mark("idle")
    proc = _client(path, scenario, runner.work / f"streams-{scenario.key}-{path.label}.log")
    budget = scenario.streams / scenario.ramp + scenario.chunks * scenario.gap_ms / 1000 + 90
    deadline = time.monotonic() + budget
    result: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline:
            line = readline(proc, max(0.1, deadline - time.monotonic()))
            if not line:
                if proc.poll() is not None:
                    break
                continue
            event = json.loads(line)
            if event["phase"] in ("open", "steady_end"):
                mark(event["phase"])
            else:
                result = event
                break
    finally:
        procs.stop(proc)
    mark("after")
    if not result:
        raise RuntimeError(
            f"stream client gave no result:\n{procs.tail(proc_log(runner, scenario, path))}"
        )
    if gateway is not None and gateway.alive():
        result["peak_rss_mb"] = gateway.memory_mb()["peak"]
    result["marks"] = marks
    return result


def proc_log(runner: Runner, scenario: StreamScenario, path: BenchPath) -> Path:
    return runner.work / f"streams-{scenario.key}-{path.label}.log"


def derived(result: dict[str, Any], streams: int) -> dict[str, Any]:
    """The headline numbers of one THROUGH round (None where a mark is missing)."""
    marks = result.get("marks", {})
    idle, opened, end = marks.get("idle", {}), marks.get("open", {}), marks.get("steady_end", {})
    out: dict[str, Any] = {}
    chunks = result.get("chunks_in_window")
    if "cpu" in opened and "cpu" in end and chunks:
        out["cpu_us_per_chunk"] = (end["cpu"] - opened["cpu"]) * 1e6 / chunks
        span = end["t"] - opened["t"]
        out["gateway_core_share"] = (end["cpu"] - opened["cpu"]) / span if span > 0 else None
        ticks = end["core_ticks"] - opened["core_ticks"]
        if ticks > 0:  # the whole core, the gateway and everything else on it
            out["core_busy"] = (end["core_busy"] - opened["core_busy"]) / ticks
    if "rss_mb" in opened and "rss_mb" in idle:
        out["rss_kb_per_stream"] = (opened["rss_mb"] - idle["rss_mb"]) * 1024 / streams
        out["rss_idle_mb"] = idle["rss_mb"]
        out["rss_open_mb"] = opened["rss_mb"]
        out["rss_after_mb"] = marks.get("after", {}).get("rss_mb")
    if "fds" in opened and "fds" in idle:
        out["fds_open"] = opened["fds"]
        out["fds_per_stream"] = (opened["fds"] - idle["fds"]) / streams
    return out


def soak(
    runner: Runner, path: BenchPath, scenario: StreamScenario, seconds: float
) -> dict[str, Any]:
    """More THROUGH rounds on the same gateway for ``seconds``: RSS with all open and
    after each round, so growth across thousands of streams shows."""
    assert path.gateway is not None
    t0 = time.monotonic()
    samples: list[dict[str, Any]] = []
    while time.monotonic() - t0 < seconds and path.gateway.alive():
        result = run_round(runner, path, scenario)
        marks = result["marks"]
        samples.append(
            {
                "t": time.monotonic() - t0,
                "open_mb": marks.get("open", {}).get("rss_mb"),
                "after_mb": marks.get("after", {}).get("rss_mb"),
                "errors": result.get("stream_errors", 0),
            }
        )
    return {"seconds": time.monotonic() - t0, "rounds": samples}


def run_scenario(runner: Runner, scenario: StreamScenario, soak_s: float = 0.0) -> list[StreamRow]:
    runner.upstream.configure(chunks=20, delay_ms=0.0, gap_ms=0.0)
    rows = [StreamRow(scenario.key, "direct")]
    path, _, why = runner.start_paths(runner.stream_probe_scenario(), scale_out=False)[0]
    through = StreamRow(scenario.key, "through")
    rows.append(through)
    if path is None or path.gateway is None:
        through.unavailable = why
    else:
        limit = open_file_limit(path.gateway.pids[0])
        needed = 2 * scenario.streams + 64
        if limit is not None and limit < needed:
            runner.notes.append(
                f"{scenario.key}: the gateway's open-file limit is {limit}, "
                f"{needed} needed for {scenario.streams} streams"
            )
        runner.warm_streams(path)  # the first calls' imports and caches are not per stream
    runner.upstream.configure(chunks=scenario.chunks, delay_ms=0.0, gap_ms=scenario.gap_ms)
    try:
        rows[0].result = run_round(runner, runner.direct, scenario)
    except RuntimeError as exc:
        rows[0].unavailable = str(exc)
    if path is not None and path.gateway is not None:
        try:
            if not path.gateway.alive():
                raise RuntimeError("gateway died:\n" + path.gateway.log_tail())
            through.result = run_round(runner, path, scenario)
            through.result |= derived(through.result, scenario.streams)
            through.result["open_file_limit"] = open_file_limit(path.gateway.pids[0])
            if soak_s > 0:
                through.result["soak"] = soak(runner, path, scenario, soak_s)
        except RuntimeError as exc:
            through.unavailable = str(exc)
        finally:
            path.gateway.stop()
    runner.upstream.configure(chunks=20, delay_ms=0.0, gap_ms=0.0)
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _added(row: StreamRow, base: StreamRow, kind: str, q: str) -> str:
    a, b = row.result.get(kind, {}).get(q), base.result.get(kind, {}).get(q)
    return "-" if a is None or b is None else f"{a - b:+.1f}"


def table(rows: list[StreamRow]) -> list[str]:
    header = (
        "scen  path     streams errors  CPU us/chunk  RSS KB/stream  fds/stream  "
        "short p50/p99 ms  +short p50/p99  probe p50/p99 ms  +probe p99  peak RSS MB"
    )
    out = [header]
    base = {r.scenario: r for r in rows if r.path == "direct"}
    for row in rows:
        if row.unavailable:
            out.append(f"{row.scenario:<5} {row.path:<8} n/a: {row.unavailable.splitlines()[0]}")
            continue
        r = row.result
        b = base.get(row.scenario, row)
        short, probe = r.get("short", {}), r.get("probe", {})
        cpu = r.get("cpu_us_per_chunk")
        rss = r.get("rss_kb_per_stream")
        fds = r.get("fds_per_stream")
        out.append(
            f"{row.scenario:<5} {row.path:<8} {r.get('streams', 0):>7} "
            f"{r.get('stream_errors', 0) + short.get('errors', 0) + probe.get('errors', 0):>6}  "
            f"{'-' if cpu is None else f'{cpu:.1f}':>12}  "
            f"{'-' if rss is None else f'{rss:.1f}':>13}  "
            f"{'-' if fds is None else f'{fds:.2f}':>10}  "
            f"{_ms(short.get('p50_ms')):>7}/{_ms(short.get('p99_ms')):<8} "
            f"{_added(row, b, 'short', 'p50_ms') if row is not b else '':>7}/"
            f"{_added(row, b, 'short', 'p99_ms') if row is not b else '':<7} "
            f"{_ms(probe.get('p50_ms')):>7}/{_ms(probe.get('p99_ms')):<8} "
            f"{_added(row, b, 'probe', 'p99_ms') if row is not b else '':>10}  "
            f"{_ms(r.get('peak_rss_mb')):>10}"
        )
    return out


def notes(rows: list[StreamRow]) -> list[str]:
    out = []
    for row in rows:
        if row.unavailable:
            if "\n" in row.unavailable:
                out.append(f"{row.scenario} {row.path}: {row.unavailable}")
            continue
        r = row.result
        kinds = r.get("stream_error_kinds") or {}
        beside = r.get("beside_errors") or {}
        window = r.get("window_s")
        line = (
            f"{row.scenario} {row.path}: steady window {window or 0:.1f} s, "
            f"{r.get('chunks_in_window') or 0} chunks in it "
            f"({r.get('chunks_per_read') or 0:.2f} chunks/read), {r.get('chunks_total', 0)} in all; "
            f"short calls in it {r.get('short', {}).get('n', 0)}, probes {r.get('probe', {}).get('n', 0)}"
        )
        if row.path != "direct":
            share = r.get("gateway_core_share")
            line += (
                f"; gateway RSS idle {r.get('rss_idle_mb') or 0:.1f} MB, "
                f"{r.get('rss_open_mb') or 0:.1f} with all open, "
                f"{r.get('rss_after_mb') or 0:.1f} after; open files {r.get('fds_open')} "
                f"(limit {r.get('open_file_limit')}); in the window the gateway took "
                f"{'-' if share is None else f'{share:.0%}'} of its core"
            )
            busy = r.get("core_busy")
            if busy is not None and share is not None:
                crowded = busy - share > 0.10
                line += f", others {max(0.0, busy - share):.0%}" + (
                    " (CROWDED: latencies are pessimistic; chunks/read > 1 also makes CPU per chunk look cheaper)"
                    if crowded
                    else ""
                )
        if kinds or beside:
            line += f"; errors {kinds} {beside}"
        out.append(line)
        soaked = r.get("soak")
        if soaked and soaked["rounds"]:
            rounds = soaked["rounds"]
            series = ", ".join(
                f"{x['t']:.0f}s {x['open_mb'] or 0:.0f}/{x['after_mb'] or 0:.0f}" for x in rounds
            )
            first, last = rounds[0]["after_mb"] or 0, rounds[-1]["after_mb"] or 0
            out.append(
                f"{row.scenario} {row.path} soak: {len(rounds)} more rounds over "
                f"{soaked['seconds']:.0f} s, RSS MB after each round {first:.1f} -> {last:.1f} "
                f"({last - first:+.1f}); errors {sum(x['errors'] for x in rounds)}; "
                f"open/after MB: {series}"
            )
    return out
