"""Driver: DIRECT vs THROUGH SWITCHYARD in the same run, alternating rounds, one table.

``python -m bench.run [--quick] [--scenarios a,b,...] [--duration S] [--scale-out]
[--server daphne|uvicorn|granian] [--markdown] [--soak S] [--rate R] [--stub] [--json FILE]``
(``--help`` lists the rest).

Layout on the machine: the gateway is pinned to the first usable core; the driver,
load generator, upstream and Redis share the others (with one core nothing is
pinned). For each scenario the gateway is started fresh (so its peak RSS belongs to
that scenario), one warm-up round per path is thrown away, then ``rounds`` rounds per
path run in alternating ABBA order (D T T D ...) so drift hits both paths alike.
The gateway's CPU per request is the delta of its own utime+stime over the measured
window (read just before a round is handed to the warm load-generator worker and just
after its result comes back) divided by responses completed.
See bench/README.md for the columns.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procs, report, streamrun
from bench.children import ChildFailed, LoadgenWorker, Upstream
from bench.gateway import (
    UPSTREAM_KEY,
    Gateway,
    GatewayUnavailable,
    Prepared,
    RedisServer,
    http_status,
    prepare,
)
from bench.otlp_sink import OTLPSink

ROOT = Path(__file__).resolve().parent.parent
DRAIN_S = 5.0


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    concurrency: int
    stream: bool = False
    chunks: int = 20
    delay_ms: float = 0.0
    group: str = "bench"  # what THROUGH calls ask for; DIRECT always asks the upstream for fast
    door: str = "chat"  # the protocol the client speaks (DIRECT speaks it to the upstream too)


SCENARIOS = {
    s.key: s
    for s in (
        Scenario("a", "non-streaming, c=1, upstream 0 ms: pure overhead", 1),
        Scenario("b", "non-streaming, c=32: throughput", 32),
        Scenario("c", "streaming 20 chunks, c=8: time-to-first-token overhead", 8, stream=True),
        Scenario("d", "non-streaming, c=64, upstream 50 ms: concurrency", 64, delay_ms=50.0),
        Scenario(
            "e",
            "(a) with a failing first target tried on every call (group "
            "bench-failover-hot, zero cooldown): price of a failover",
            1,
            group="bench-failover-hot",
        ),
        Scenario(
            "f",
            "(a) with the failing first target left cooling after its first failure "
            "(group bench-failover, default circuit): price of skipping it",
            1,
            group="bench-failover",
        ),
        Scenario(
            "r",
            "streaming 60 chunks, c=1, the first target cut at chunk 40 (group bench-rescue, "
            "resume: continuation): price of a mid-stream rescue (a restart elsewhere)",
            1,
            stream=True,
            chunks=60,
            group="bench-rescue",
        ),
        Scenario(
            "s",
            "(a) against group bench-limits (all 7 group limits configured, never reached, "
            "a price): price of the limit check and settle; compare with a (--interleave)",
            1,
            group="bench-limits",
        ),
        Scenario(
            "i",
            "(a) through the Messages door to an anthropic target: pass-through",
            1,
            group="bench-claude",
            door="messages",
        ),
        Scenario(
            "j",
            "(c) through the Messages door to an anthropic target: pass-through stream",
            8,
            stream=True,
            group="bench-claude",
            door="messages",
        ),
        Scenario(
            "k",
            "(a) through the chat door to an anthropic target: translated both ways",
            1,
            group="bench-claude",
        ),
        Scenario(
            "l",
            "(c) through the chat door to an anthropic target: translated stream",
            8,
            stream=True,
            group="bench-claude",
        ),
        Scenario(
            "m",
            "(a) through the Responses door to an openai-responses target: pass-through",
            1,
            group="bench-resp",
            door="responses",
        ),
        Scenario(
            "n",
            "(c) through the Responses door to an openai-responses target: pass-through stream",
            8,
            stream=True,
            group="bench-resp",
            door="responses",
        ),
        Scenario(
            "o",
            "(c) through the Messages door to an openai target: translated stream",
            8,
            stream=True,
            door="messages",
        ),
        Scenario(
            "t",
            "(c) through the Gemini door to an openai target: translated stream (compare o)",
            8,
            stream=True,
            door="gemini",
        ),
        Scenario(
            "u",
            "(a) through the Gemini door to an openai target: translated both ways",
            1,
            door="gemini",
        ),
        Scenario(
            "p",
            "(a) through the Responses door to an anthropic target: translated both ways",
            1,
            group="bench-claude",
            door="responses",
        ),
        Scenario(
            "q",
            "(c) through the Responses door to an anthropic target: translated stream",
            8,
            stream=True,
            group="bench-claude",
            door="responses",
        ),
    )
}
DEFAULT_SCENARIOS = "a,b,c,d,e,f,i,j,k,l,m,n,o,p,q,s"
# Four paths per scenario double the time; these three show what a shared store costs
# per call (a), under load (b) and when health changes on every call (e).
SCALE_OUT_SCENARIOS = "a,b,e"


@dataclass
class BenchPath:
    """One way to reach the upstream: directly, or through a gateway (maybe with Redis)."""

    label: str
    url: str
    key: str
    gateway: Gateway | None = None
    store: RedisServer | None = None

    def model(self, scenario: Scenario) -> str:
        if self.gateway is None:
            return "fast"
        return self.gateway.prepared.group(scenario.group)


class RoundFailed(Exception):
    pass


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.gateway_cpus, self.client_cpus = procs.plan_cpus()
        if self.client_cpus:
            procs.pin(0, self.client_cpus)  # children (loadgen, upstream, redis) inherit this
        self.upstream = Upstream(work)
        try:
            self.loadgen = LoadgenWorker(work)
        except ChildFailed:
            self.upstream.stop()
            raise
        self.direct = BenchPath("direct", self.upstream.url, UPSTREAM_KEY)
        self.prepared: Prepared | None = None
        self.unavailable: str | None = None
        self.redis: RedisServer | None = None
        self.otlp = OTLPSink() if args.otlp else None  # --otlp: where the traced gateway exports
        self.notes: list[str] = []
        self.gateway_pinning: str = "-"
        self.idle_cpu: list[float] = []
        self._gateways_alive: list[Gateway] = []  # sampled during direct rounds: idle cost
        self.started: list[Gateway] = []

    # ---- set-up ---------------------------------------------------------------------
    def setup(self) -> None:
        try:
            self.prepared = prepare(
                repo=ROOT, work=self.work, upstream_port=self.upstream.port, stub=self.args.stub
            )
        except GatewayUnavailable as exc:
            self.unavailable = f"gateway set-up failed: {exc}"
            return
        self.notes += self.prepared.notes
        if self.args.scale_out:
            self.redis = RedisServer(self.work, self.client_cpus)
            try:
                self.redis.start()
            except GatewayUnavailable as exc:
                self.notes.append(f"scale-out skipped: {exc}")
                self.redis = None

    def start_paths(
        self, scenario: Scenario, *, scale_out: bool, lag_file: Path | None = None
    ) -> list[tuple[BenchPath | None, str, str | None]]:
        """The THROUGH paths for one scenario: (path or None, label, why unavailable).
        ``lag_file``: serve the gateway through ``bench.lagged`` (its loop lag, sampled)."""
        server = self.args.server
        wanted: list[tuple[str, int, str | None, str]] = [("through", 1, None, server)]
        wanted += [(f"through {name}", 1, None, name) for name in self.args.also_servers]
        if self.otlp is not None:
            wanted.append(("otlp", 1, None, server))
        if scale_out:
            if self.redis is None:
                wanted += [("redis x1", 1, "n/a", server), ("redis x2", 2, "n/a", server)]
            else:
                wanted += [
                    ("redis x1", 1, self.redis.url(1), server),
                    ("redis x2", 2, self.redis.url(2), server),
                ]
        started: list[tuple[BenchPath | None, str, str | None]] = []
        for label, count, redis_url, server in wanted:
            if self.prepared is None or redis_url == "n/a":
                started.append((None, label, self.unavailable or "redis-server unavailable"))
                continue
            cpus = self.gateway_cpus
            if redis_url and self.args.every_core and cpus:  # serve --workers N's shape
                cpus = cpus | set(self.client_cpus or ())
            gateway = Gateway(
                label.replace(" ", ""),
                self.prepared,
                server,
                count,
                redis_url,
                cpus,
                self.args.quiet_server,
                lag_file,
                self._tracing_env() if label == "otlp" else {},
            )
            self.started.append(gateway)  # close() stops whatever is still running
            try:
                gateway.start()
            except GatewayUnavailable as exc:
                started.append((None, label, str(exc)))
                continue
            path = BenchPath(
                label, gateway.url, self.prepared.secret, gateway, self.redis if redis_url else None
            )
            problem = self.preflight(path, scenario)
            if problem:
                gateway.stop()
                started.append((None, label, problem))
            else:
                started.append((path, label, None))
                self.gateway_pinning = " / ".join(
                    sorted({procs.allowed_cpus(p) for p in gateway.pids})
                )
        return started

    def _tracing_env(self) -> dict[str, str]:
        """The standard variables that turn tracing on, pointed at the discarding sink."""
        assert self.otlp is not None
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp.endpoint, "OTEL_SERVICE_NAME": "bench"}

    def preflight(self, path: BenchPath, scenario: Scenario) -> str | None:
        body = json.dumps(
            {"model": path.model(scenario), "messages": [{"role": "user", "content": "ping"}]}
        ).encode()
        answer = http_status(
            "127.0.0.1",
            path.gateway.port if path.gateway else 0,
            "POST",
            "/v1/chat/completions",
            body=body,
            timeout=15.0,
            headers={"Authorization": f"Bearer {path.key}", "Content-Type": "application/json"},
        )
        if answer is None:
            return "preflight: no HTTP answer"
        status, _, data = answer
        if status != 200 or b'"choices"' not in data:
            return f"preflight: HTTP {status}: {data[:200].decode('utf-8', 'replace')}"
        return None

    # ---- one round ------------------------------------------------------------------
    def run_round(self, path: BenchPath, scenario: Scenario, duration: float) -> dict[str, Any]:
        argv = [
            "--url",
            path.url,
            "--model",
            path.model(scenario),
            "--key",
            path.key,
            "-c",
            str(scenario.concurrency),
            "-d",
            str(duration),
            "--drain",
            str(DRAIN_S),
        ]
        if scenario.stream:
            argv += ["--stream", "--expect-chunks", str(scenario.chunks)]
        if scenario.door != "chat":
            argv += ["--door", scenario.door]
        if self.args.rate:
            argv += ["--rate", str(self.args.rate)]
        try:
            before = self._counters(path)
            self.loadgen.start(argv)
            result = self.loadgen.result(timeout=duration + DRAIN_S + 30)
            after = self._counters(path)
        except ChildFailed as exc:
            raise RoundFailed(str(exc)) from exc

        done = max(result["completed"], 1)
        if path.gateway is not None:
            result["gateway_cpu_ms_per_req"] = (after["gateway"] - before["gateway"]) * 1000 / done
            result["gateway_cpu_s_by_process"] = [
                b - a for a, b in zip(before["split"], after["split"], strict=False)
            ]
            busy = after["core"][0] - before["core"][0]
            ticks = after["core"][1] - before["core"][1]
            if ticks > 0:
                own = (after["gateway"] - before["gateway"]) * procs.CLOCK_TICKS / ticks
                result["gateway_core"] = {
                    "busy": busy / ticks,
                    "gateway": own,
                    "other": max(0.0, busy / ticks - own),
                }
        elif self._gateways_alive:
            idle = after["gateway"] - before["gateway"]
            self.idle_cpu.append(idle * 1000 / result["elapsed_s"])
        if path.store is not None:
            result["store_cpu_ms_per_req"] = (after["store"] - before["store"]) * 1000 / done
        result["upstream"] = {
            k: after["upstream"].get(k, 0) - v for k, v in before["upstream"].items()
        } | {k: v for k, v in after["upstream"].items() if k not in before["upstream"]}
        result["steal"] = (after["steal"] - before["steal"]) / max(
            1, after["total"] - before["total"]
        )
        return result

    def _counters(self, path: BenchPath) -> dict[str, Any]:
        gateways = [path.gateway] if path.gateway else self._gateways_alive
        jiffies = procs.cpu_jiffies()
        return {
            "gateway": sum(g.cpu_seconds() for g in gateways if g.alive()),
            "split": path.gateway.cpu_by_process() if path.gateway and path.gateway.alive() else [],
            "store": path.store.cpu_seconds() if path.store else 0.0,
            "upstream": self.upstream.stats(),
            "core": procs.core_jiffies(self.gateway_cpus),
            "steal": jiffies["steal"],
            "total": jiffies["total"],
        }

    # ---- one scenario ---------------------------------------------------------------
    def run_scenarios(
        self, scenarios: list[Scenario], duration: float, rounds: int, warmup: float
    ) -> list[report.Row]:
        """Scenarios of one shape (``batches``) on one fresh gateway, their rounds
        interleaved (``--interleave``): each round index runs every scenario's paths, in
        ABBA order over scenarios and paths, so a machine whose speed drifts (a shared
        host) slows them alike and their CPU ratios hold."""
        first = scenarios[0]
        self.upstream.configure(chunks=first.chunks, delay_ms=first.delay_ms)
        started = self.start_paths(first, scale_out=self.args.scale_out)
        paths = [self.direct] + [p for p, _, _ in started if p is not None]
        self._gateways_alive = [p.gateway for p in paths if p.gateway is not None]
        rows = {(s.key, p.label): report.Row(s.key, p.label) for s in scenarios for p in paths}
        failed: dict[tuple[str, str], str] = {}
        try:
            for order_index in range(rounds + (1 if warmup > 0 else 0)):
                is_warmup = warmup > 0 and order_index == 0
                forward = order_index % 2 == 0
                for scenario in scenarios if forward else scenarios[::-1]:
                    for path in paths if forward else paths[::-1]:
                        self._one_round(
                            scenario, path, warmup if is_warmup else duration,
                            is_warmup, rows, failed,
                        )  # fmt: skip
        finally:
            for path in paths:
                if path.gateway is not None:
                    if path.gateway.alive():
                        peak = path.gateway.memory_mb()["peak"]
                        for scenario in scenarios:
                            rows[(scenario.key, path.label)].peak_mb = peak
                    path.gateway.stop()
            self._gateways_alive = []
        for slot, problem in failed.items():
            rows[slot].unavailable = rows[slot].unavailable or problem
        out: list[report.Row] = []
        for scenario in scenarios:
            out.append(rows[(scenario.key, "direct")])
            for started_path, label, why in started:
                out.append(
                    rows[(scenario.key, label)]
                    if started_path is not None
                    else report.Row(scenario.key, label, unavailable=why)
                )
        return out

    def _one_round(
        self,
        scenario: Scenario,
        path: BenchPath,
        duration: float,
        is_warmup: bool,
        rows: dict[tuple[str, str], report.Row],
        failed: dict[tuple[str, str], str],
    ) -> None:
        slot = (scenario.key, path.label)
        if slot in failed:
            return
        if path.gateway is not None and not path.gateway.alive():
            failed[slot] = "gateway process died during the run:\n" + path.gateway.log_tail()
            return
        try:
            result = self.run_round(path, scenario, duration)
        except RoundFailed as exc:
            failed[slot] = str(exc)
            return
        if not is_warmup:
            rows[slot].rounds.append(result)
        elif result["error_count"]:
            self.notes.append(
                f"{scenario.key} {path.label} warm-up errors: "
                f"{result['errors']} {result['error_samples'][:1]}"
            )

    # ---- scenarios g, h (--streams) -------------------------------------------------
    def stream_probe_scenario(self) -> Scenario:
        """What the stream scenarios' gateway is preflighted with."""
        return Scenario("streams", "streams", 1, stream=True)

    def warm_streams(self, path: BenchPath) -> None:
        """A second of short streams at c=8 (upstream at 20 chunks, no gap), discarded."""
        try:
            self.run_round(path, Scenario("warm", "warm", 8, stream=True), 1.0)
        except RoundFailed as exc:
            self.notes.append(f"stream warm-up failed: {exc}")

    # ---- soak -----------------------------------------------------------------------
    def soak(self, seconds: float) -> dict[str, Any]:
        """c=32 non-streaming for ``seconds``, RSS sampled every 5 s from the start."""
        scenario = Scenario("soak", "soak", 32)
        self.upstream.configure(chunks=20, delay_ms=0.0)
        path, _, why = self.start_paths(scenario, scale_out=False)[0]
        if path is None or path.gateway is None:
            return {"unavailable": why}
        gateway = path.gateway
        samples: list[tuple[float, float]] = [(0.0, gateway.memory_mb()["rss"])]
        cmd = [
            sys.executable,
            "-m",
            "bench.loadgen",
            "--url",
            path.url,
            "--model",
            "bench",
            "--key",
            path.key,
            "-c",
            "32",
            "-d",
            str(seconds),
            "--json",
        ]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            while proc.poll() is None and time.monotonic() - t0 < seconds + DRAIN_S + 30:
                time.sleep(min(5.0, max(0.0, 5.0 * len(samples) - (time.monotonic() - t0))))
                if gateway.alive() and proc.poll() is None:
                    samples.append((time.monotonic() - t0, gateway.memory_mb()["rss"]))
            out, _ = proc.communicate(timeout=DRAIN_S + 30)
            peak = gateway.memory_mb()["peak"] if gateway.alive() else None
        finally:
            if proc.poll() is None:
                procs.stop(proc)
            gateway.stop()
        result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        rss = [mb for _, mb in samples]
        return {
            "samples": samples,
            "first": rss[0],
            "last": rss[-1],
            "max": max(rss),
            "peak_hwm": peak,
            "completed": result.get("completed"),
            "rps": result.get("rps"),
            "errors": result.get("errors"),
        }

    def close(self) -> None:
        self.loadgen.stop()
        for gateway in self.started:
            gateway.stop()
        if self.otlp is not None:
            self.notes.append(
                f"otlp: the traced gateway exported {self.otlp.exports} batches "
                f"({self.otlp.bytes / 1e6:.1f} MB) to the loopback sink, which discards them"
            )
            self.otlp.stop()
        if self.redis is not None:
            self.redis.stop()
        self.upstream.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="1 s rounds, 2 rounds: under a minute")
    parser.add_argument(
        "--scenarios",
        default=None,
        help=f"comma list from {','.join(SCENARIOS)} (default {DEFAULT_SCENARIOS}; "
        f"{SCALE_OUT_SCENARIOS} with --scale-out; 'none' with --soak)",
    )
    parser.add_argument("--duration", type=float, default=None, help="seconds per measured round")
    parser.add_argument("--rounds", type=int, default=None, help="measured rounds per path")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up round seconds (0: none)"
    )
    parser.add_argument(
        "--scale-out",
        action="store_true",
        help="add Redis-backed rows: one process, and two behind one port",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="run scenarios of one shape (JSON or stream, same upstream settings) on one "
        "gateway, their rounds interleaved: CPU ratios between them (e.g. a,i,m) that hold "
        "on a machine whose speed drifts; peak RSS is then the shared gateway's",
    )
    parser.add_argument(
        "--otlp",
        action="store_true",
        help="add an 'otlp' row: a gateway with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT set) "
        "exporting to a loopback collector that discards: what tracing costs per call",
    )
    parser.add_argument("--server", choices=("daphne", "uvicorn", "granian"), default="daphne")
    parser.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    parser.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="S",
        help="RSS growth check: c=32 for S seconds, RSS every 5 s",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open loop at R req/s instead of closed-loop concurrency",
    )
    parser.add_argument(
        "--stub",
        action="store_true",
        help="serve bench.stub_gateway instead of Switchyard (harness check)",
    )
    parser.add_argument(
        "--also-servers",
        default="",
        help="comma-separated servers (uvicorn, granian) measured as more THROUGH rows of "
        "the same run, their rounds interleaved with the others",
    )
    parser.add_argument(
        "--every-core",
        action="store_true",
        help="with --scale-out: the Redis-backed gateways may run on every core (the shape "
        "of serve --workers N), sharing the client core with the load generator",
    )
    parser.add_argument(
        "--quiet-server",
        action="store_true",
        help="run the server without its access log (daphne -v 0)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="write every round's raw numbers here"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, DB)")
    parser.add_argument(
        "--streams",
        nargs="?",
        const="g,h",
        default="",
        metavar="KEYS",
        help="long-stream scenarios g (2,000 open) and h (5,000), or the ones listed; "
        "without --scenarios only these run",
    )
    parser.add_argument(
        "--stream-count", type=int, default=0, help="streams for every --streams scenario"
    )
    parser.add_argument(
        "--stream-chunks", type=int, default=0, help="chunks per stream (default 200)"
    )
    parser.add_argument(
        "--stream-gap-ms",
        type=float,
        default=0.0,
        help="ms between a stream's chunks (default 100); e.g. h at 1000 holds 5,000 streams "
        "at a chunk rate two cores can carry",
    )
    parser.add_argument(
        "--stream-history-kb",
        dest="history_kb",
        type=int,
        default=0,
        metavar="KB",
        help="KB of earlier turns in each stream's request (default none: a one-line "
        "request); an agent's requests carry tens to hundreds",
    )
    parser.add_argument(
        "--stream-soak",
        type=float,
        default=0.0,
        metavar="S",
        help="after each stream scenario's THROUGH round, repeat it on the same gateway "
        "for S seconds and report RSS after each round",
    )
    args = parser.parse_args(argv)
    args.also_servers = [n.strip() for n in args.also_servers.split(",") if n.strip()]
    if set(args.also_servers) - {"daphne", "uvicorn", "granian"}:
        parser.error("--also-servers takes daphne, uvicorn and granian")
    args.stream_keys = [k.strip() for k in args.streams.split(",") if k.strip()]
    bad = [k for k in args.stream_keys if k not in streamrun.STREAM_SCENARIOS]
    if bad:
        parser.error(f"unknown stream scenarios {bad}; choose from g,h")
    if args.scenarios is None:
        args.scenarios = (
            "none"
            if args.soak or args.stream_keys
            else SCALE_OUT_SCENARIOS
            if args.scale_out
            else DEFAULT_SCENARIOS
        )
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip() and args.scenarios != "none"]
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; choose from {','.join(SCENARIOS)}")
    args.keys = keys
    quick = args.quick
    args.duration = args.duration or (1.0 if quick else 5.0)
    args.rounds = args.rounds or (2 if quick else 3)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if quick else 2.0)
    return args


def batches(args: argparse.Namespace) -> list[list[Scenario]]:
    """The scenarios to run, one per gateway; with ``--interleave``, those of one shape
    (JSON or stream, the upstream's chunks and delay) together, in the order asked for:
    a batch of a few keeps each round cycle short, so drift within it stays small."""
    if not args.interleave:
        return [[SCENARIOS[k]] for k in args.keys]
    grouped: dict[tuple[bool, int, float], list[Scenario]] = {}
    for key in args.keys:
        scenario = SCENARIOS[key]
        shape = (scenario.stream, scenario.chunks, scenario.delay_ms)
        grouped.setdefault(shape, []).append(scenario)
    return list(grouped.values())


def estimate_s(args: argparse.Namespace) -> float:
    paths = 2 + len(args.also_servers) + (2 if args.scale_out else 0) + (1 if args.otlp else 0)
    # ~0.15 s of bookkeeping and drain per round; ~3 s to boot each gateway
    rounds = args.warmup + args.rounds * args.duration + (args.rounds + 1) * 0.15
    streams = sum(
        2 * (s.streams / s.ramp + s.chunks * s.gap_ms / 1000) + 10 + args.stream_soak
        for k, s in streamrun.STREAM_SCENARIOS.items()
        if k in args.stream_keys
    )
    total: float = len(args.keys) * (paths * rounds + 3 * (paths - 1)) + args.soak * 1.1 + streams
    return total + 10


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (make, CI timeouts) cleans up like Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    from bench import output

    wall0 = time.monotonic()
    info = procs.machine_info()
    load_before, jiffies_before = procs.loadavg(), procs.cpu_jiffies()
    print(
        f"bench: scenarios {','.join(args.keys) or '-'}, {args.rounds} x {args.duration:g} s "
        f"rounds per path, warm-up {args.warmup:g} s, soak {args.soak:g} s; "
        f"estimated {estimate_s(args):.0f} s",
        file=sys.stderr,
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="switchyard-bench-"))
    try:
        runner = Runner(args, work)
    except ChildFailed as exc:
        print(f"bench: cannot start: {exc}", file=sys.stderr)
        return 2
    rows: list[report.Row] = []
    soak: dict[str, Any] | None = None
    stream_rows: list[streamrun.StreamRow] = []
    stream_titles: list[str] = []
    try:
        runner.setup()
        for batch in batches(args):
            for each in batch:
                print(f"bench: scenario {each.key}: {each.title}", file=sys.stderr)
            if len(batch) > 1:
                print("bench: ...interleaved on one gateway", file=sys.stderr, flush=True)
            rows += runner.run_scenarios(batch, args.duration, args.rounds, args.warmup)
        if args.soak:
            print(f"bench: soak {args.soak:g} s", file=sys.stderr, flush=True)
            soak = runner.soak(args.soak)
        for key in args.stream_keys:
            scenario = streamrun.STREAM_SCENARIOS[key]
            if args.stream_count or args.stream_chunks or args.stream_gap_ms or args.history_kb:
                scenario = dataclasses.replace(
                    scenario,
                    streams=args.stream_count or scenario.streams,
                    chunks=args.stream_chunks or scenario.chunks,
                    gap_ms=args.stream_gap_ms or scenario.gap_ms,
                    history_kb=args.history_kb,
                )
            print(f"bench: scenario {key}: {scenario.title}", file=sys.stderr, flush=True)
            stream_titles.append(f"  {key}  {scenario.title}")
            stream_rows += streamrun.run_scenario(runner, scenario, args.stream_soak)
    except KeyboardInterrupt:
        runner.notes.append("interrupted: the table holds what was measured so far")
    except ChildFailed as exc:
        runner.notes.append(f"aborted: {exc}")
    finally:
        runner.close()
    jiffies_after = procs.cpu_jiffies()
    steal = (jiffies_after["steal"] - jiffies_before["steal"]) / max(
        1, jiffies_after["total"] - jiffies_before["total"]
    )
    print(
        output.render(
            args=args,
            info=info,
            rows=rows,
            runner=runner,
            soak=soak,
            load=(load_before, procs.loadavg()),
            steal=steal,
            wall=time.monotonic() - wall0,
            work=work,
            scenarios=SCENARIOS,
        )
    )
    if stream_rows:
        print("\nlong streams (scenarios g, h; '+' = through minus direct, same run):")
        print("\n".join(streamrun.table(stream_rows)))
        print("\n".join(stream_titles))
        print("stream notes:\n" + "\n".join(f"  - {n}" for n in streamrun.notes(stream_rows)))
        from bench import relay

        print(relay.report())  # the relay's own share of the CPU per chunk above
    from bench import rewrite

    print(rewrite.report())  # history rewriting across a switch: CPU per call (issue 13)
    if args.json:
        raw = output.raw(rows, soak, info)
        raw["streams"] = [vars(r) for r in stream_rows]
        args.json.write_text(json.dumps(raw, indent=1, default=str))
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
