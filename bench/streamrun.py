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
- RSS per open stream = (RSS with N open - idle RSS) / N; files per stream likewise; RSS
  and open files again at ``steady_end``, after the window's thousands of chunks;
- event-loop lag: the gateway is served through ``bench.lagged``, which samples its own
  loop (how late a 20 ms sleep wakes) into a file; p50/p99/max over the window.

Added latency columns are THROUGH minus DIRECT of the same run. Errors are split by side
(``bench.streams``): ``client`` errors are the harness's own (out of files or ports, or a
client whose loop lagged too far to wait for the server), the rest the server's — the
gateway in THROUGH, the upstream mock in DIRECT. Every round also reports the client's
and the upstream's health (their CPU share in the window, the client's loop lag, how late
the upstream's paced writes were), so a round where the harness was the limit says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
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
    history_kb: int = 0  # earlier turns in each stream's request (an agent's history)

    @property
    def title(self) -> str:
        history = f", each request with {self.history_kb} KB of history" if self.history_kb else ""
        return (
            f"{self.streams} concurrent streams, {self.chunks} chunks {self.gap_ms:g} ms apart, "
            f"opened at {self.ramp:g}/s{history}; short calls at {self.short_rate:g}/s beside them"
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


def read_lags(path: Path, since: float = 0.0, until: float = float("inf")) -> list[float]:
    """The ms-late samples ``bench.lagged`` wrote between ``since`` and ``until``."""
    try:
        text = path.read_text()
    except OSError:
        return []
    lags = []
    for line in text.splitlines():
        at, _, late = line.partition(" ")
        try:
            if since <= float(at) <= until:
                lags.append(float(late))
        except ValueError:
            continue
    return lags


def gc_file(lag_file: Path) -> Path:
    """Where ``bench.lagged`` writes the collections it saw, beside its lag samples."""
    return lag_file.with_name(lag_file.name + ".gc")


def read_collections(lag_file: Path, since: float, until: float) -> dict[str, float]:
    """The garbage collections ``bench.lagged`` saw between ``since`` and ``until``."""
    try:
        text = gc_file(lag_file).read_text()
    except OSError:
        return {}
    count = full = freed = 0
    total = longest = 0.0
    for line in text.splitlines():
        try:
            at, generation, ms, found = line.split()
            if not since <= float(at) <= until:
                continue
        except ValueError:
            continue
        count += 1
        full += generation == "2"
        total += float(ms)
        longest = max(longest, float(ms))
        freed += int(found)
    return {"count": count, "full": full, "total_ms": total, "max_ms": longest, "freed": freed}


def lag_stats(lags: list[float]) -> dict[str, float | None]:
    ordered = sorted(lags)

    def q(p: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else None

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": ordered[-1] if ordered else None}


def listen_limits() -> str:
    """The kernel's caps on a listen backlog (both servers ask for 4096)."""
    values = []
    for name in ("net/core/somaxconn", "net/ipv4/tcp_max_syn_backlog"):
        try:
            values.append(f"{name.rsplit('/', 1)[1]} {Path('/proc/sys', name).read_text().strip()}")
        except OSError:
            continue
    return ", ".join(values)


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
        "--history-kb",
        str(scenario.history_kb),
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
    pid = gateway.pids[-1] if gateway else None  # the serving process (granian: its worker)
    upstream_pid = runner.upstream.proc.pid
    marks: dict[str, dict[str, float]] = {}

    def mark(name: str) -> None:
        if pid is not None and os.environ.get("BENCH_MEMORY_DIR"):  # bench.lagged.census
            os.kill(pid, signal.SIGUSR1)
            time.sleep(1)  # it writes while the streams run; the marks below come after
        busy, ticks = procs.core_jiffies(runner.gateway_cpus)
        marks[name] = {
            "t": time.monotonic(),
            "core_busy": busy,
            "core_ticks": ticks,
            "upstream_cpu": procs.cpu_seconds(upstream_pid),
        }
        if pid is not None and gateway is not None and gateway.alive():
            marks[name] |= {
                "cpu": gateway.cpu_seconds(),
                "rss_mb": gateway.memory_mb()["rss"],
                "fds": open_files(pid),
            }

    paced = runner.upstream.stats()
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
    result_upstream = {k: v - paced.get(k, 0) for k, v in runner.upstream.stats().items()}
    if not result:
        raise RuntimeError(
            f"stream client gave no result:\n{procs.tail(proc_log(runner, scenario, path))}"
        )
    if gateway is not None and gateway.alive():
        result["peak_rss_mb"] = gateway.memory_mb()["peak"]
    result["marks"] = marks
    result["upstream"] = upstream_health(result_upstream, marks)
    if gateway is not None and gateway.lag_file is not None:
        opened, ended = marks.get("open", {}), marks.get("steady_end", {})
        result["loop_lag"] = lag_stats(
            read_lags(gateway.lag_file, opened.get("t", marks["idle"]["t"]), ended.get("t", 1e18))
        )
        result["loop_lag_round"] = lag_stats(
            read_lags(gateway.lag_file, marks["idle"]["t"], marks["after"]["t"])
        )
        result["gc"] = read_collections(
            gateway.lag_file, opened.get("t", marks["idle"]["t"]), ended.get("t", 1e18)
        )
    return result


def upstream_health(stats: Mapping[str, int], marks: dict[str, dict[str, float]]) -> dict[str, Any]:
    """How the upstream mock kept up: its CPU share in the window, and how late its paced
    writes were (``bench/upstream.py`` counts them) over the round."""
    out: dict[str, Any] = {}
    opened, ended = marks.get("open"), marks.get("steady_end")
    if opened and ended and ended["t"] > opened["t"]:
        out["window_cpu_share"] = (ended["upstream_cpu"] - opened["upstream_cpu"]) / (
            ended["t"] - opened["t"]
        )
    writes = stats.get("paced writes", 0)
    out["paced_writes"] = writes
    out["late_mean_ms"] = stats.get("paced late ms", 0) / writes if writes else None
    out["late_over_100ms"] = stats.get("paced late>100ms", 0)
    return out


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
    if "rss_mb" in end:  # after the window's chunks: growth here is per-chunk garbage kept
        out["rss_steady_end_mb"] = end["rss_mb"]
        out["fds_steady_end"] = end.get("fds")
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
                "end_mb": marks.get("steady_end", {}).get("rss_mb"),
                "after_mb": marks.get("after", {}).get("rss_mb"),
                "errors": result.get("stream_errors", 0),
            }
        )
    return {"seconds": time.monotonic() - t0, "rounds": samples}


def run_scenario(runner: Runner, scenario: StreamScenario, soak_s: float = 0.0) -> list[StreamRow]:
    runner.upstream.configure(chunks=20, delay_ms=0.0, gap_ms=0.0)
    rows = [StreamRow(scenario.key, "direct")]
    path, _, why = runner.start_paths(
        runner.stream_probe_scenario(),
        scale_out=False,
        lag_file=runner.work / f"loop-lag-{scenario.key}.txt",
    )[0]
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


def errors(result: dict[str, Any]) -> tuple[int, int]:
    """(all errors of the round, those put down to the client)."""
    sides = result.get("errors_by_side")
    if sides is None:  # a client without sides: count what it reported
        short, probe = result.get("short", {}), result.get("probe", {})
        total = result.get("stream_errors", 0) + short.get("errors", 0) + probe.get("errors", 0)
        return total, 0
    return sum(sides.values()), sides.get("client", 0)


def table(rows: list[StreamRow]) -> list[str]:
    header = (
        "scen  path     streams errors/client  CPU us/chunk  RSS KB/stream  fds/stream  "
        "short p50/p99 ms  +short p50/p99  probe p50/p99 ms  +probe p99  lag p99 ms  "
        "peak RSS MB"
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
        total, client = errors(r)
        out.append(
            f"{row.scenario:<5} {row.path:<8} {r.get('streams', 0):>7} "
            f"{f'{total}/{client}':>13}  "
            f"{'-' if cpu is None else f'{cpu:.1f}':>12}  "
            f"{'-' if rss is None else f'{rss:.1f}':>13}  "
            f"{'-' if fds is None else f'{fds:.2f}':>10}  "
            f"{_ms(short.get('p50_ms')):>7}/{_ms(short.get('p99_ms')):<8} "
            f"{_added(row, b, 'short', 'p50_ms') if row is not b else '':>7}/"
            f"{_added(row, b, 'short', 'p99_ms') if row is not b else '':<7} "
            f"{_ms(probe.get('p50_ms')):>7}/{_ms(probe.get('p99_ms')):<8} "
            f"{_added(row, b, 'probe', 'p99_ms') if row is not b else '':>10}  "
            f"{_ms(r.get('loop_lag', {}).get('p99_ms')):>10}  "
            f"{_ms(r.get('peak_rss_mb')):>11}"
        )
    return out


def harness_note(row: StreamRow) -> str:
    """Whether the client and the upstream mock kept up, and whose the errors were."""
    r = row.result
    client, upstream = r.get("client") or {}, r.get("upstream") or {}
    lag = client.get("lag_window", {}).get("p99_ms") or client.get("lag_all", {}).get("p99_ms")
    share, up_share = client.get("window_cpu_share"), upstream.get("window_cpu_share")
    late = upstream.get("late_mean_ms")
    line = (
        f"{row.scenario} {row.path} harness: client {'-' if share is None else f'{share:.0%}'}"
        f" of a core in the window, its loop lag p99 {_ms(lag)} ms; upstream "
        f"{'-' if up_share is None else f'{up_share:.0%}'} of a core, paced writes "
        f"{upstream.get('paced_writes', 0)} late by {_ms(late)} ms on average, "
        f"{upstream.get('late_over_100ms', 0)} by over 100 ms"
    )
    if client.get("lagging"):
        line += " (CLIENT LAGGING: its late errors count as the client's)"
    if upstream.get("late_over_100ms", 0) > 0.01 * (upstream.get("paced_writes") or 0):
        line += " (UPSTREAM BEHIND: over 1% of its writes late by 100 ms; the mock slowed streams)"
    total, own = errors(r)
    if total:
        line += f"; errors by side {r.get('errors_by_side')}"
    elif r.get("errors_by_side") is not None:
        line += "; no errors"
    return line + (f"; client open-file limit {r['open_file_limit']}" if own else "")


def notes(rows: list[StreamRow]) -> list[str]:
    out = [f"kernel listen caps: {listen_limits()} (servers ask for a backlog of 4096)"]
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
            if r.get("rss_steady_end_mb") is not None and r.get("rss_open_mb") is not None:
                line += (
                    f"; at the window's end RSS {r['rss_steady_end_mb']:.1f} MB "
                    f"({r['rss_steady_end_mb'] - r['rss_open_mb']:+.1f} over the window), "
                    f"open files {r.get('fds_steady_end')}"
                )
            lag, whole = r.get("loop_lag") or {}, r.get("loop_lag_round") or {}
            if lag.get("p50_ms") is not None:
                line += (
                    f"; event-loop lag in the window (sampled in the gateway process) "
                    f"p50 {_ms(lag['p50_ms'])} / p99 {_ms(lag['p99_ms'])} / max "
                    f"{_ms(lag['max_ms'])} ms, over the round p99 {_ms(whole.get('p99_ms'))} / "
                    f"max {_ms(whole.get('max_ms'))} ms"
                )
            collected = r.get("gc") or {}
            if collected.get("count"):
                line += (
                    f"; garbage collection in the window: {collected['count']} runs "
                    f"({collected['full']} full), {collected['total_ms']:.0f} ms in all, "
                    f"longest {collected['max_ms']:.0f} ms, {collected.get('freed', 0)} objects "
                    f"freed (reference cycles)"
                )
        if kinds or beside:
            line += f"; errors {kinds} {beside}"
        out.append(line)
        out.append(harness_note(row))
        soaked = r.get("soak")
        if soaked and soaked["rounds"]:
            rounds = soaked["rounds"]
            series = ", ".join(
                f"{x['t']:.0f}s {x['open_mb'] or 0:.0f}/{x.get('end_mb') or 0:.0f}/"
                f"{x['after_mb'] or 0:.0f}"
                for x in rounds
            )
            first, last = rounds[0]["after_mb"] or 0, rounds[-1]["after_mb"] or 0
            out.append(
                f"{row.scenario} {row.path} soak: {len(rounds)} more rounds over "
                f"{soaked['seconds']:.0f} s, RSS MB after each round {first:.1f} -> {last:.1f} "
                f"({last - first:+.1f}); errors {sum(x['errors'] for x in rounds)}; "
                f"RSS MB with all open / at the window's end / after: {series}"
            )
    return out
