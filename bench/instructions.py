"""Instructions per call through each door, counted by valgrind: a figure this shared VM's
drifting speed cannot move (``python -m bench.instructions``, about 5 min per scenario).

``bench.run`` measures CPU time, which on this machine drifts by up to 2x within minutes
(other tenants), so two scenarios' CPU per request compare only when interleaved
(``--interleave``) and even then within about 10 %. Counting instructions is exact: each
scenario's calls are made in process, straight into the ASGI application (no HTTP server:
daphne's share is the same per request whatever the door), against the bench upstream over
loopback, under ``valgrind --tool=callgrind``. A run makes ``WARM`` calls, another
``WARM + calls``; the difference over ``calls`` is the cost of one call, set-up and import
excluded. The two runs of a scenario go side by side (one per core). The audit writer's
batches are flushed before each run ends, so their work is in the count.

Needs valgrind (Debian's ``valgrind``); reports relative to scenario a (JSON) and c (streams).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import procs
from bench.children import Upstream
from bench.gateway import prepare
from bench.loadgen import endpoint
from bench.loadgen import request_body as door_body
from bench.run import ROOT, SCENARIOS

COUNTABLE = ("a", "c", "i", "j", "k", "l", "m", "n", "o", "p", "q", "t", "u")  # one at a time
WARM = 60  # calls before the counted ones: caches, pools and lazy imports settle
COLLECTED = re.compile(r"Collected : (\d+)")
HOOKS_ONLY = "BENCH_TRACING_HOOKS_ONLY"  # --hooks-only, for the measured process


def scope(target: str, body: bytes, key: str) -> dict[str, Any]:
    path, _, query = target.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {key}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def request_body(key: str) -> bytes:
    """What ``bench.loadgen`` sends for this scenario (same fields, same model names)."""
    scenario = SCENARIOS[key]
    return door_body(scenario.door, scenario.group, scenario.stream)


def door_path(key: str) -> str:
    scenario = SCENARIOS[key]
    return "/v1" + endpoint(scenario.door, scenario.group, scenario.stream)


def quiet() -> None:
    """Slow the gateway's timed background work to a crawl. The audit writer drains by
    size or every 0.2 s, the configuration watcher reads the database every second and
    the health checker wakes on its own clock: under valgrind (~50x slower) those timers
    fire per few calls instead of per hundreds, so the count would depend on how slow the
    calls ran — with tracing on, the audit's batches came out smaller and its INSERTs
    more. Quiet, the writer drains by size (and at the end), as a busy gateway's does."""
    from routing.audit import writer
    from routing.gateway import sync
    from routing.gateway.runtime import get_runtime

    writer.get_writer().interval_s = 3600.0
    watcher = sync._watcher
    if watcher is not None:
        watcher.interval_s = 3600.0
    runtime = get_runtime()
    runtime.background_checks = False
    if runtime._checker is not None:
        runtime._checker.cancel()


def drive(key: str, calls: int, secret: str, blocks: int | None = None) -> None:
    """In the measured process: Django set up, ``calls`` calls through the application.

    With ``blocks`` (tracing on in the environment), ``blocks`` pairs of ``calls`` calls
    instead, one block of each pair traced and the other not (the runtime's tracing set
    aside), in ABBA order; prints each block's CPU time per call (every thread's: the
    audit's writes and the spans' export are flushed at the block's end, inside it)."""
    import django

    django.setup()
    from router_project.asgi import application

    app: Any = application  # driven with plain dicts, as a server would
    from routing.audit import writer
    from routing.gateway.runtime import get_runtime

    path = door_path(key)
    body = request_body(key)
    request = scope(path, body, secret)

    async def one() -> None:
        sent = False
        statuses: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client stays connected
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(dict(request), receive, send)
        if statuses != [200]:
            raise SystemExit(f"scenario {key}: the gateway answered {statuses}")

    async def run() -> None:
        await one()  # starts the background work that quiet() then slows down
        quiet()
        tracing = get_runtime().tracing
        if tracing is not None and os.environ.get(HOOKS_ONLY):
            tracing.hand_over = lambda call: None
        for _ in range(calls - 1):
            await one()

    async def toggled(pairs: int) -> None:
        await one()
        quiet()
        runtime = get_runtime()
        tracing = runtime.tracing
        if tracing is None:
            raise SystemExit("--cpu needs tracing on (OTEL_EXPORTER_OTLP_ENDPOINT)")
        if os.environ.get(HOOKS_ONLY):  # ended calls are dropped, not handed over
            tracing.hand_over = lambda call: None
        for _ in range(WARM):
            await one()
        for pair in range(pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for traced in order:
                runtime.tracing = tracing if traced else None
                started, loop_started = time.process_time(), time.thread_time()
                for _ in range(calls):
                    await one()
                loop = time.thread_time() - loop_started  # this thread: the event loop's
                writer.flush(30)
                tracing.force_flush()
                spent = time.process_time() - started
                label = "traced" if traced else "untraced"
                print(f"{label} {spent / calls * 1e6:.2f} {loop / calls * 1e6:.2f}")

    if blocks:
        asyncio.run(toggled(blocks))
        return
    asyncio.run(run())
    writer.flush(30)
    tracing = get_runtime().tracing
    if tracing is not None:  # ``--otlp``: the spans' encoding and export are counted too
        tracing.force_flush()


def count(
    key: str, calls: int, env: dict[str, str], secret: str, work: Path
) -> subprocess.Popen[str]:
    """Start one counted run (valgrind's summary goes to its stderr)."""
    command = [
        "valgrind", "--tool=callgrind", "--separate-threads=yes",
        f"--callgrind-out-file={work}/callgrind.{key}.{calls}",
        sys.executable, "-m", "bench.instructions", "--drive", key, str(calls), secret,
    ]  # fmt: skip
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def thread_totals(work: Path, key: str, calls: int) -> dict[int, int]:
    """Instructions per thread of one counted run, by callgrind's thread number (its
    ``--separate-threads`` files; 1 is the main thread, which runs the event loop and,
    at the end, the last export of spans: ``BatchSpanProcessor.force_flush`` exports on
    the thread that calls it)."""
    totals: dict[int, int] = {}
    for profile in work.glob(f"callgrind.{key}.{calls}-*"):
        with profile.open() as lines:
            for line in lines:
                if line.startswith(("summary:", "totals:")):
                    totals[int(profile.name.rsplit("-", 1)[1])] = int(line.split()[1])
                    break
    return totals


def measure(
    keys: list[str],
    calls: int,
    otlp: bool = False,
    keep: Path | None = None,
    loop_share: dict[str, float] | None = None,
    hooks_only: bool = False,
) -> dict[str, float]:
    """Instructions per call of each scenario; ``loop_share``, when given, gets the main
    thread's part of it (the calls themselves and, with ``otlp``, the spans' export at
    the end; the other threads are the audit writer's and Django's executor's).
    ``hooks_only`` (with ``otlp``): the ended calls are dropped, not exported, so the
    main thread's part is the calls with tracing's hooks on the request path alone."""
    work = Path(tempfile.mkdtemp(prefix="switchyard-instructions-"))
    upstream = Upstream(work)
    sink = None
    try:
        prepared = prepare(repo=ROOT, work=work, upstream_port=upstream.port, stub=False)
        env = {
            **prepared.env,
            "PYTHONHASHSEED": "0",
            "DJANGO_SETTINGS_MODULE": "router_project.settings",
            **({HOOKS_ONLY: "1"} if hooks_only else {}),
        }
        if otlp:
            from bench.otlp_sink import OTLPSink

            sink = OTLPSink()
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.endpoint
            # Exported by size (512 spans), as a busy gateway's are, not every 5 s of
            # valgrind's slow time (a few calls per export); the rest at the end.
            env["OTEL_BSP_SCHEDULE_DELAY"] = "3600000"
        per_call: dict[str, float] = {}
        for key in keys:
            scenario = SCENARIOS[key]
            upstream.configure(chunks=scenario.chunks, delay_ms=0.0)
            runs = [count(key, n, env, prepared.secret, work) for n in (WARM, WARM + calls)]
            totals = []
            for process in runs:
                _, err = process.communicate()
                found = COLLECTED.search(err)
                if process.returncode != 0 or found is None:
                    raise SystemExit(f"scenario {key}: the counted run failed:\n{err[-2000:]}")
                totals.append(int(found.group(1)))
            per_call[key] = (totals[1] - totals[0]) / calls
            mains = [thread_totals(work, key, n).get(1, 0) for n in (WARM, WARM + calls)]
            if loop_share is not None:
                loop_share[key] = (mains[1] - mains[0]) / calls
            print(
                f"  {key}: {per_call[key] / 1e6:.3f} M instructions per call, "
                f"{(mains[1] - mains[0]) / calls / 1e6:.3f} M of them on the main thread",
                file=sys.stderr,
            )
        return per_call
    finally:
        if sink is not None:
            sink.stop()
        upstream.stop()
        if keep is not None:  # the profiles, for callgrind_annotate
            keep.mkdir(parents=True, exist_ok=True)
            for profile in work.glob("callgrind.*"):
                shutil.copy(profile, keep / profile.name)
        shutil.rmtree(work, ignore_errors=True)


def measure_cpu(
    keys: list[str], calls: int, pairs: int, hooks_only: bool = False
) -> dict[str, dict[str, float]]:
    """CPU time per call, untraced and traced, measured in one process whose calls are
    traced in every other block of ``calls`` (``drive``): blocks seconds apart, so the
    machine's drift (up to 2x within minutes on a shared VM) hits both alike. Medians in
    microseconds, the median of the pairs' differences (``delta``), their mean with its
    standard error, and that mean split into the event loop's thread (the calls and their
    spans) and the others (the batch exporter's encoding and sends, the audit writer).
    ``hooks_only``: the traced blocks' ended calls are dropped instead of handed to the
    batch processor (no spans made or sent): what the request path's hooks cost alone. Not
    instructions: what the CPU spent, cache misses and the kernel's share included."""
    from bench.otlp_sink import OTLPSink

    work = Path(tempfile.mkdtemp(prefix="switchyard-cpu-"))
    mine, others = procs.plan_cpus()  # the measured process on a core of its own
    upstream = Upstream(work)
    procs.pin(upstream.proc.pid, others)
    before = os.sched_getaffinity(0)
    procs.pin(os.getpid(), others)  # the sink's thread too (until the end)
    sink = OTLPSink()
    try:
        prepared = prepare(repo=ROOT, work=work, upstream_port=upstream.port, stub=False)
        env = {
            **prepared.env,
            "DJANGO_SETTINGS_MODULE": "router_project.settings",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "3600000",  # by size, and at each block's end
            **({HOOKS_ONLY: "1"} if hooks_only else {}),
        }
        out: dict[str, dict[str, float]] = {}
        for key in keys:
            upstream.configure(chunks=SCENARIOS[key].chunks, delay_ms=0.0)
            command = [
                sys.executable, "-m", "bench.instructions", "--drive", key, str(calls),
                prepared.secret, str(pairs),
            ]  # fmt: skip
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                preexec_fn=(lambda: procs.pin(0, mine)) if mine else None,
            )
            seen: dict[str, list[tuple[float, float]]] = {"traced": [], "untraced": []}
            for label, spent, loop in re.findall(
                r"^(traced|untraced) ([\d.]+) ([\d.]+)$", done.stdout, re.M
            ):
                seen[label].append((float(spent), float(loop)))
            if done.returncode != 0 or len(seen["traced"]) != pairs:
                raise SystemExit(f"scenario {key}: the timed run failed:\n{done.stderr[-2000:]}")
            pairs_seen = list(zip(seen["traced"], seen["untraced"], strict=True))
            deltas = [t[0] - u[0] for t, u in pairs_seen]
            loop_deltas = [t[1] - u[1] for t, u in pairs_seen]
            out[key] = {
                "untraced": statistics.median(s for s, _ in seen["untraced"]),
                "traced": statistics.median(s for s, _ in seen["traced"]),
                "delta": statistics.median(deltas),
                "low": sorted(deltas)[len(deltas) // 4],
                "high": sorted(deltas)[(3 * len(deltas)) // 4],
                **_mean_se("mean", deltas),
                **_mean_se("loop", loop_deltas),
                **_mean_se("others", [d - lp for d, lp in zip(deltas, loop_deltas, strict=True)]),
                "exports": sink.exports,  # so far: the traced blocks' spans reached the sink
            }
            print(
                f"  {key}: {out[key]['untraced']:.1f} -> {out[key]['traced']:.1f} us CPU per "
                f"call; pairs' deltas {', '.join(f'{d:+.1f}' for d in deltas)}",
                file=sys.stderr,
            )
        return out
    finally:
        sink.stop()
        upstream.stop()
        procs.pin(os.getpid(), before)
        shutil.rmtree(work, ignore_errors=True)


def _mean_se(name: str, values: list[float]) -> dict[str, float]:
    """The mean and its standard error: with a few hundred pairs, the figure to quote
    (this VM's blocks spread by tens of µs; the median alone hides how sure it is)."""
    spread = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
    return {name: statistics.fmean(values), f"{name}_se": spread}


def report_cpu(found: dict[str, dict[str, float]], pairs: int, calls: int) -> str:
    lines = [
        f"| scen | what | untraced µs CPU per call | traced | tracing's cost over {pairs} "
        f"pairs of {calls}-call blocks: median (middle half) | mean ± standard error | "
        "of which the event loop's thread | other threads (export, audit writer) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, row in found.items():
        lines.append(
            f"| {key} | {SCENARIOS[key].title} | {row['untraced']:.1f} | {row['traced']:.1f} "
            f"| {row['delta']:+.1f} µs ({row['low']:+.1f} … {row['high']:+.1f}) "
            f"| {row['mean']:+.1f} ± {row['mean_se']:.1f} µs "
            f"| {row['loop']:+.1f} ± {row['loop_se']:.1f} "
            f"| {row['others']:+.1f} ± {row['others_se']:.1f} |"
        )
    return "\n".join(lines)


def report(per_call: dict[str, float], loop_share: dict[str, float] | None = None) -> str:
    loop_share = loop_share or {}
    lines = [
        "| scen | what | M instructions per call | vs chat | of which the main thread |",
        "|---|---|---:|---:|---:|",
    ]
    for key, value in per_call.items():
        scenario = SCENARIOS[key]
        base = "c" if scenario.stream else "a"
        versus = (
            "—" if key == base or base not in per_call else f"{value / per_call[base] - 1:+.1%}"
        )
        main = f"{loop_share[key] / 1e6:.3f}" if key in loop_share else "—"
        lines.append(f"| {key} | {scenario.title} | {value / 1e6:.3f} | {versus} | {main} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--scenarios",
        default="a,i,m,c,j,n",
        help=f"from {','.join(COUNTABLE)} (default a,i,m,c,j,n)",
    )
    parser.add_argument("--calls", type=int, default=200, help="counted calls per scenario")
    parser.add_argument(
        "--otlp",
        action="store_true",
        help="tracing on, exporting to a loopback collector that discards (docs/tracing.md)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep the callgrind profiles there (callgrind_annotate reads them)",
    )
    parser.add_argument(
        "--cpu",
        type=int,
        metavar="PAIRS",
        help="no valgrind: CPU time per call untraced and traced (to a loopback collector), "
        "in one process, PAIRS pairs of --calls-call blocks per scenario",
    )
    parser.add_argument(
        "--hooks-only",
        action="store_true",
        help="with --cpu or --otlp: traced calls are not handed to the exporter (the "
        "request path's share of tracing alone)",
    )
    parser.add_argument(
        "--drive", nargs="+", metavar="KEY CALLS SECRET [TIMED_FROM]", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.drive:
        key, calls, secret, *blocks = args.drive
        drive(key, int(calls), secret, int(blocks[0]) if blocks else None)
        return
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    unknown = [k for k in keys if k not in COUNTABLE]
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}")
    if args.hooks_only and not (args.cpu or args.otlp):
        parser.error("--hooks-only needs --cpu or --otlp (tracing on)")
    if args.cpu:
        found = measure_cpu(keys, args.calls, args.cpu, hooks_only=args.hooks_only)
        print(report_cpu(found, args.cpu, args.calls))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions needs valgrind (apt-get install valgrind)")
    loop_share: dict[str, float] = {}
    per_call = measure(
        keys,
        args.calls,
        otlp=args.otlp,
        keep=args.keep,
        loop_share=loop_share,
        hooks_only=args.hooks_only,
    )
    print(report(per_call, loop_share))


if __name__ == "__main__":
    main()
