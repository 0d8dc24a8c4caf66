"""Prove the harness works without the gateway: ``python -m bench.selftest`` (~3 s).

Runs DIRECT rounds only, through the driver's own round code (load generator as a
subprocess, upstream counters, /proc accounting), and checks things that can fail:
answers are counted and validated, streams yield exactly the configured number of
content chunks with a time to first token, the upstream's delay shows in the latency,
``fail503`` and a wrong key are reported as errors, the open-loop mode keeps its
rate, pinning took, and the table renders. Exit status 0 only if every check passed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import procs, report
from bench.run import BenchPath, Runner, Scenario, parse_args


def main() -> int:
    failures: list[str] = []

    def check(name: str, ok: bool, detail: Any = "") -> None:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail else ""))
        if not ok:
            failures.append(name)

    work = Path(tempfile.mkdtemp(prefix="switchyard-bench-selftest-"))
    runner = Runner(parse_args(["--quick", "--scenarios", "a"]), work)
    try:
        run: Callable[..., dict[str, Any]] = runner.run_round
        direct = runner.direct

        plain = run(direct, Scenario("t", "plain", 8), 0.6)
        check(
            "non-streaming answers counted, no errors",
            plain["ok"] > 100 and plain["error_count"] == 0,
            f"{plain['ok']} ok, {plain['rps']:.0f} req/s, errors {plain['errors']}",
        )
        check(
            "upstream saw every call",
            plain["upstream"].get("fast 200", 0) == plain["completed"],
            plain["upstream"],
        )

        runner.upstream.configure(chunks=20, delay_ms=0)
        stream = run(direct, Scenario("t", "stream", 4, stream=True, chunks=20), 0.4)
        ttft, lat = stream["ttft_ms"]["p50"], stream["latency_ms"]["p50"]
        check(
            "streams: 20 content chunks each, TTFT <= total latency",
            stream["ok"] > 50 and stream["error_count"] == 0 and ttft is not None and ttft <= lat,
            f"ttft p50 {ttft}, latency p50 {lat}",
        )

        runner.upstream.configure(chunks=3, delay_ms=0)
        short = run(direct, Scenario("t", "short", 2, stream=True, chunks=20), 0.2)
        check(
            "a stream with the wrong chunk count is an error",
            short["ok"] == 0 and short["errors"].get("short-stream", 0) > 0,
            short["errors"],
        )

        runner.upstream.configure(chunks=20, delay_ms=40)
        slow = run(direct, Scenario("t", "slow", 4), 0.4)
        check(
            "upstream delay shows in latency",
            (slow["latency_ms"]["p50"] or 0) >= 40,
            f"p50 {slow['latency_ms']['p50']}",
        )
        runner.upstream.configure(chunks=20, delay_ms=0)

        failing = BenchPath("direct-503", direct.url, direct.key)
        failing.model = lambda scenario: "fail503"  # type: ignore[method-assign]
        bad = run(failing, Scenario("t", "503", 2), 0.2)
        check(
            "fail503 answers are counted as http-503 errors",
            bad["ok"] == 0 and bad["errors"].get("http-503", 0) == bad["completed"] > 0,
            bad["errors"],
        )
        wrong_key = BenchPath("direct-badkey", direct.url, "wrong")
        denied = run(wrong_key, Scenario("t", "401", 1), 0.1)
        check(
            "a wrong upstream key is refused",
            denied["errors"].get("http-401", 0) > 0,
            denied["errors"],
        )

        runner.args.rate = 400.0
        paced = run(direct, Scenario("t", "open", 64), 0.5)
        runner.args.rate = 0.0
        check(
            "open loop keeps its rate",
            180 <= paced["completed"] <= 220 and paced["ok"] > 0,
            f"{paced['completed']} calls in 0.5 s at 400/s, late {paced['late']}",
        )

        pid = runner.upstream.proc.pid
        memory = procs.memory_kb(pid)
        check(
            "/proc accounting readable",
            procs.cpu_seconds(pid) > 0 and memory["VmHWM"] > 0,
            f"cpu {procs.cpu_seconds(pid):.2f} s, VmHWM {memory['VmHWM']} kB",
        )
        if runner.client_cpus:
            allowed = procs.allowed_cpus(pid)
            expected = ",".join(map(str, sorted(runner.client_cpus)))
            check(
                "upstream pinned to the client cores",
                allowed in (expected, expected.replace(",", "-"))
                or set(allowed.split(",")) == set(expected.split(",")),
                f"{allowed} vs {expected}",
            )

        row = report.Row("t", "direct", rounds=[plain])
        table = report.aligned([row.values(None)])
        check("table renders", "req/s" in table and len(table.splitlines()) == 3)
    finally:
        runner.close()
        shutil.rmtree(work, ignore_errors=True)
    print("selftest:", "OK" if not failures else f"{len(failures)} FAILED: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
