"""What tracing costs per call, in instructions (valgrind) and in CPU time, without the
rest of the gateway: ``python -m bench.tracing_cost`` (about 3 min).

A call's tracing work is replayed in process exactly as a call drives it (its state,
``routing.gateway.state``: ``start_call``, one attempt's ``attempt_ended``, ``finish``;
``attempt_started`` from ``routing.gateway.retry``, ``committed`` from
``routing.gateway.call``), and its spans go through the real ``BatchSpanProcessor`` and the official
OTLP/HTTP exporter to a loopback sink in another process that discards them, so encoding
and sending are counted too. ``make bench BENCH_ARGS=--otlp`` measures the same cost
inside the whole gateway, as CPU time on a machine whose speed drifts; instruction counts
(the difference between a run of ``WARM`` calls and one of ``WARM + CALLS``) do not drift.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARM, CALLS = 100, 600
ROUNDS = 3
COLLECTED = re.compile(r"Collected : (\d+)")


def replay(endpoint: str, calls: int, sampler: str, traced: bool = True) -> float:
    """``calls`` traced calls after ``WARM``; returns the CPU seconds of the counted ones
    (this process: request path and the export thread). Untraced, only the records a
    call makes anyway: the baseline subtracted from the traced figure. The collector is
    set as the gateway sets it (``tune_garbage_collection``)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "router_project.settings")
    import django

    django.setup()
    from routing.engine.algorithms import Candidate
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.limits import tune_garbage_collection
    from routing.gateway.table import ProviderSpec, TargetSpec
    from routing.observability.tracing import build_tracing
    from routing.upstream.openai import Timeouts

    tracing = build_tracing(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": sampler}
    )
    assert tracing is not None
    tune_garbage_collection()
    provider = ProviderSpec(
        name="p1",
        kind="openai",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        headers={},
        timeouts=Timeouts(),
        version=1,
    )
    target = TargetSpec(Candidate("p1/fast", "p1", "fast", 0), provider, "fast", None)

    def records() -> tuple[AttemptRecord, CallRecord]:
        """What a call records whether traced or not (the untraced baseline)."""
        attempt = AttemptRecord(target="p1/fast", try_number=1, ok=True, elapsed_ms=0.3)
        record = CallRecord(
            call_id="0123456789abcdef0123456789abcdef",
            group="bench",
            session=None,
            stream=False,
            started_at=time.time(),
            served_by="p1/fast",
            usage={"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
            attempts=[attempt],
            elapsed_ms=0.6,
            ttft_ms=0.5,
            key_name="bench",
        )
        return attempt, record

    def one() -> None:
        trace = tracing.start_call(
            headers=None,
            started_ns=time.time_ns(),
            door="chat",
            endpoint=None,
            requested_model="bench",
            group="bench",
            key_name="bench",
            request_id="0123456789abcdef0123456789abcdef",
            stream=False,
            commit="first-content",
        )
        trace.attempt_started(target, 1, False, None)
        attempt, record = records()
        trace.attempt_ended(target, attempt)
        trace.committed(0.0003)
        record.trace_id = trace.trace_id
        trace.finish(record)

    call: Callable[[], object] = one if traced else records
    for _ in range(WARM):
        call()
    tracing.force_flush()
    started = time.process_time()
    for n in range(calls):
        call()
        if n % 256 == 255:  # the processor's batch: exports as the gateway's would
            tracing.force_flush()
    tracing.force_flush()
    spent = time.process_time() - started
    tracing.shutdown()
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_cost")
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument(
        "--sampler",
        default="parentbased_always_on",
        help="OTEL_TRACES_SAMPLER for the replayed calls (always_off: what a sampled-out "
        "call still costs: ids and the traceparent header)",
    )
    parser.add_argument("--replay", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--untraced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay is not None:
        spent = replay(args.endpoint, args.replay, args.sampler, traced=not args.untraced)
        print(f"cpu_s {spent:.6f}")
        return 0
    sink = subprocess.Popen(
        [sys.executable, "-c", SINK], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None
        endpoint = sink.stdout.readline().strip()
        me = [sys.executable, "-m", "bench.tracing_cost", "--endpoint", endpoint]
        me += ["--sampler", args.sampler]
        cpu = []
        for _ in range(ROUNDS):  # alternated, so the machine's drift hits both alike
            for flag in ([], ["--untraced"]):
                timed = subprocess.run(
                    [*me, "--replay", str(args.calls), *flag],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                cpu.append(float(timed.stdout.split()[-1]) / args.calls * 1e6)
        traced = statistics.median(cpu[0::2])
        base = statistics.median(cpu[1::2])
        print(
            f"CPU (process time, this machine now, median of {ROUNDS}): "
            f"{traced - base:.1f} us per traced call ({traced:.1f} with the call's own "
            f"records, {base:.1f} without tracing)"
        )
        if not shutil.which("valgrind"):
            print("valgrind not installed: no instruction count")
            return 0
        counts = []
        cases = [(n, flag) for flag in ([], ["--untraced"]) for n in (0, args.calls)]
        runs = [
            subprocess.Popen(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    *me,
                    "--replay",
                    str(n),
                    *flag,
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for n, flag in cases
        ]
        for run in runs:
            _, err = run.communicate()
            found = COLLECTED.findall(err)
            if not found:
                print(f"valgrind failed: {err[-500:]}")
                return 1
            counts.append(int(found[-1]))
        per_call = ((counts[1] - counts[0]) - (counts[3] - counts[2])) / args.calls
        print(
            f"instructions: {per_call / 1000:.1f} K per traced call "
            f"(a whole call through the chat door: about 3 200 K, bench.instructions)"
        )
    finally:
        sink.terminate()
        sink.wait(timeout=10)
    return 0


SINK = """
import time
from bench.otlp_sink import OTLPSink
sink = OTLPSink()
print(sink.endpoint, flush=True)
while True:
    time.sleep(3600)
"""

if __name__ == "__main__":
    sys.exit(main())
