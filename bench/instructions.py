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
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from bench.children import Upstream
from bench.gateway import prepare
from bench.loadgen import ENDPOINTS
from bench.run import ROOT, SCENARIOS

COUNTABLE = ("a", "c", "i", "j", "k", "l", "m", "n", "o", "p", "q")  # one call at a time
WARM = 60  # calls before the counted ones: caches, pools and lazy imports settle
COLLECTED = re.compile(r"Collected : (\d+)")


def scope(path: str, body: bytes, key: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
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
    body: dict[str, object] = {"model": scenario.group, "stream": scenario.stream}
    if scenario.door == "responses":
        body.update(input="ping", max_output_tokens=32, store=False)
    else:
        body.update(messages=[{"role": "user", "content": "ping"}], max_tokens=32)
    return orjson.dumps(body)


def drive(key: str, calls: int, secret: str) -> None:
    """In the measured process: Django set up, ``calls`` calls through the application."""
    import django

    django.setup()
    from router_project.asgi import application

    app: Any = application  # driven with plain dicts, as a server would
    from routing.audit import writer

    path = "/v1" + ENDPOINTS[SCENARIOS[key].door]
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
        for _ in range(calls):
            await one()

    asyncio.run(run())
    writer.flush(30)
    from routing.gateway.runtime import get_runtime

    tracing = get_runtime().tracing
    if tracing is not None:  # ``--otlp``: the spans' encoding and export are counted too
        tracing.force_flush()


def count(
    key: str, calls: int, env: dict[str, str], secret: str, work: Path
) -> subprocess.Popen[str]:
    """Start one counted run (valgrind's summary goes to its stderr)."""
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.{key}.{calls}",
        sys.executable, "-m", "bench.instructions", "--drive", key, str(calls), secret,
    ]  # fmt: skip
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def measure(keys: list[str], calls: int, otlp: bool = False) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="switchyard-instructions-"))
    upstream = Upstream(work)
    sink = None
    try:
        prepared = prepare(repo=ROOT, work=work, upstream_port=upstream.port, stub=False)
        env = {
            **prepared.env,
            "PYTHONHASHSEED": "0",
            "DJANGO_SETTINGS_MODULE": "router_project.settings",
        }
        if otlp:
            from bench.otlp_sink import OTLPSink

            sink = OTLPSink()
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.endpoint
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
            print(f"  {key}: {per_call[key] / 1e6:.3f} M instructions per call", file=sys.stderr)
        return per_call
    finally:
        if sink is not None:
            sink.stop()
        upstream.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(per_call: dict[str, float]) -> str:
    lines = ["| scen | what | M instructions per call | vs chat |", "|---|---|---:|---:|"]
    for key, value in per_call.items():
        scenario = SCENARIOS[key]
        base = "c" if scenario.stream else "a"
        versus = (
            "—" if key == base or base not in per_call else f"{value / per_call[base] - 1:+.1%}"
        )
        lines.append(f"| {key} | {scenario.title} | {value / 1e6:.3f} | {versus} |")
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
        "--drive", nargs=3, metavar=("KEY", "CALLS", "SECRET"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.drive:
        key, calls, secret = args.drive
        drive(key, int(calls), secret)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions needs valgrind (apt-get install valgrind)")
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    unknown = [k for k in keys if k not in COUNTABLE]
    if unknown:
        raise SystemExit(f"unknown scenarios {unknown}")
    print(report(measure(keys, args.calls, otlp=args.otlp)))


if __name__ == "__main__":
    main()
