"""The benchmark's comparison tools (bench/README.md, "Comparing scenarios on a shared
machine"): what they group, send and divide is checked here; their figures come from
``make bench`` and ``python -m bench.instructions``, never from a timed test."""

from __future__ import annotations

import argparse
import os
import re

import pytest

from bench import instructions, loadgen
from bench.run import SCENARIOS, batches, parse_args


def keys(argv: list[str]) -> list[list[str]]:
    return [[s.key for s in batch] for batch in batches(parse_args(argv))]


def test_interleave_puts_scenarios_that_share_the_upstreams_settings_on_one_gateway() -> None:
    assert keys(["--scenarios", "a,c,i,j,m,n,d"]) == [
        ["a"],
        ["c"],
        ["i"],
        ["j"],
        ["m"],
        ["n"],
        ["d"],
    ]
    assert keys(["--interleave", "--scenarios", "a,c,i,j,m,n,d"]) == [
        ["a", "i", "m"],  # JSON answers
        ["c", "j", "n"],  # 20-chunk streams
        ["d"],  # a 50 ms upstream: a gateway of its own
    ]


@pytest.mark.parametrize("key", instructions.COUNTABLE)
def test_counted_calls_send_what_the_load_generator_sends(key: str) -> None:
    scenario = SCENARIOS[key]
    target = loadgen.make_target(
        argparse.Namespace(
            url="http://127.0.0.1:8000/v1", door=scenario.door, model=scenario.group,
            stream=scenario.stream, expect_chunks=scenario.chunks, key="k",
        )
    )  # fmt: skip
    body = instructions.request_body(key)
    assert target.request.endswith(b"\r\n\r\n" + body)
    request = instructions.scope(instructions.door_path(key), body, "k")
    query = request["query_string"].decode()
    path = request["path"] + (f"?{query}" if query else "")
    assert target.request.startswith(f"POST {path} ".encode())


def test_the_report_compares_json_calls_with_a_and_streams_with_c() -> None:
    table = instructions.report(
        {"a": 4e6, "m": 4.4e6, "c": 5e6, "n": 4.75e6, "i": 4.2e6}, {"a": 3.1e6}
    )
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert rows["a"].endswith("| 4.000 | — | 3.100 |")
    assert rows["m"].endswith("| 4.400 | +10.0% | — |")
    assert rows["i"].endswith("| 4.200 | +5.0% | — |")
    assert rows["n"].endswith("| 4.750 | -5.0% | — |")
    assert rows["c"].endswith("| 5.000 | — | — |")


def test_a_counted_run_s_threads_are_read_from_callgrind_s_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--separate-threads`` writes one file per thread, named ``-01``, ``-02``…;
    the main thread's share of a call is told apart from the writer's and exporter's."""
    for thread, total in ((1, 6_491_091_916), (2, 205_016_462), (12, 82_824)):
        (tmp_path / f"callgrind.a.60-{thread:02d}").write_text(
            f"# callgrind format\nversion: 1\ncmd: python\npart: 1\nthread: {thread}\n"
            f"events: Ir\nsummary: {total}\n\nfl=(1) x.c\nfn=(1) f\n0 {total}\n"
            f"totals: {total}\n"
        )
    (tmp_path / "callgrind.a.260-01").write_text("summary: 7\n")  # another run's
    assert instructions.thread_totals(tmp_path, "a", 60) == {
        1: 6_491_091_916,
        2: 205_016_462,
        12: 82_824,
    }


def test_the_stream_report_counts_the_collections_inside_the_window(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.streamrun import gc_file, read_collections

    lag_file = tmp_path / "loop-lag-g.txt"
    gc_file(lag_file).write_text(
        "9.5000 2 900.00 7\n"  # before the window
        "10.1000 0 0.50 0\n10.2000 2 310.25 1200\n10.9000 1 4.00 35\nnot a line\n"
        "11.5000 2 800.00 9\n"  # after it
    )
    assert read_collections(lag_file, 10.0, 11.0) == {
        "count": 3, "full": 1, "total_ms": 314.75, "max_ms": 310.25, "freed": 1235,
    }  # fmt: skip
    assert read_collections(tmp_path / "none.txt", 0, 1) == {}


def test_the_stream_bench_history_weighs_what_it_says() -> None:
    import orjson

    from bench.streams import history

    assert history(0) == [{"role": "user", "content": "hello"}]
    turns = history(40)
    assert len(turns) == 41 and turns[-1] == {"role": "user", "content": "hello"}
    assert [t["role"] for t in turns[:3]] == ["user", "assistant", "user"]
    assert 40_000 <= len(orjson.dumps(turns)) <= 44_000


def test_the_scale_out_report_gives_the_measured_and_the_cpu_accounted_scaling() -> None:
    from bench import output, report

    def row(path: str, rps: float, cpu: float) -> report.Row:
        rounds = [{"rps": rps, "gateway_cpu_ms_per_req": cpu}] * 3
        return report.Row("b", path, rounds)  # type: ignore[arg-type]

    line = output._scaling(
        "b", [row("through", 200, 1.0), row("redis x1", 100, 1.5), row("redis x2", 150, 1.6)]
    )
    assert line is not None
    assert "1.50x req/s measured" in line
    assert "1.88x CPU-accounted (2 x 1.50 / 1.60 ms per call" in line
    assert output._scaling("b", [row("through", 200, 1.0)]) is None


def test_the_cpu_report_gives_the_median_pair_the_mean_and_which_thread_paid() -> None:
    row = {"untraced": 1000.0, "traced": 1040.0, "delta": 38.5, "low": -12.0, "high": 90.25}
    row |= instructions._mean_se("mean", [30.0, 50.0, 40.0, 40.0])
    row |= instructions._mean_se("loop", [10.0, 30.0, 20.0, 20.0])
    row |= instructions._mean_se("others", [20.0, 20.0, 20.0, 20.0])
    assert row["mean"] == 40.0 and round(row["mean_se"], 3) == round(8.165 / 2, 3)
    assert row["others_se"] == 0.0
    table = instructions.report_cpu({"a": row}, pairs=8, calls=500).splitlines()
    assert "over 8 pairs of 500-call blocks" in table[0]
    assert table[2].endswith(
        "| 1000.0 | 1040.0 | +38.5 µs (-12.0 … +90.2) | +40.0 ± 4.1 µs | +20.0 ± 4.1 | +20.0 ± 0.0 |"
    )


def test_the_cpu_comparison_runs_traced_and_untraced_blocks_in_one_gateway() -> None:
    """``--cpu``: a real gateway process against the bench upstream, tracing to the
    discarding sink every other block; each pair gives both figures."""
    cpus = os.sched_getaffinity(0)
    found = instructions.measure_cpu(["a"], calls=3, pairs=2)
    assert os.sched_getaffinity(0) == cpus  # the caller's cores given back
    assert set(found) == {"a"}
    row = found["a"]
    assert row["untraced"] > 0 and row["traced"] > 0
    assert row["low"] <= row["delta"] <= row["high"]
    # every pair's difference is the loop thread's plus the other threads'
    assert row["mean"] == pytest.approx(row["loop"] + row["others"])
    assert row["mean_se"] >= 0 and row["loop_se"] >= 0
    assert row["exports"] >= 2  # each traced block flushed its spans to the collector


def test_the_audit_writer_bench_writes_real_rows_and_reports_cpu_per_record(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``bench.audit_writer`` in a process of its own (it sets up Django on a database of
    its own): rows written through ``rows_write`` into the SQLite file it is given."""
    import sqlite3
    import subprocess
    import sys

    database = tmp_path / "audit.sqlite3"
    done = subprocess.run(
        [
            sys.executable, "-m", "bench.audit_writer", "--records", "600", "--rounds", "2",
            "--database-url", f"sqlite:///{database}",
        ],
        capture_output=True, text=True, check=False, cwd=instructions.ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "router_project.settings"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.match(
        r"audit writer: [\d.]+ µs CPU per call record \(median of 2 rounds", done.stdout
    )
    with sqlite3.connect(database) as db:
        # warm-up batch + two rounds of one batch each (records per round // BATCH_SIZE)
        (calls,) = db.execute("select count(*) from audit_call").fetchone()
        (failovers,) = db.execute(
            "select count(*) from audit_call where served_by_fallback"
        ).fetchone()
    assert calls == 3 * 500 and failovers == 3 * 50
    bad = subprocess.run(
        [sys.executable, "-m", "bench.audit_writer", "--rounds", "0"],
        capture_output=True, text=True, check=False, cwd=instructions.ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "--rounds must be at least 1" in bad.stderr


def test_the_hooks_only_comparison_hands_nothing_to_the_exporter() -> None:
    """``--cpu --hooks-only``: the traced blocks draw ids and send traceparents, but no
    call reaches the batch processor: the collector gets only the first call's spans (made
    before the blocks: it starts the runtime), where a full run's traced blocks export one
    batch each (``exports >= 2`` above)."""
    found = instructions.measure_cpu(["a"], calls=3, pairs=2, hooks_only=True)
    assert found["a"]["traced"] > 0 and found["a"]["exports"] == 1


def test_a_counted_run_with_hooks_only_exports_no_call_after_the_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--otlp --hooks-only`` (counted by valgrind; here the same driven run without it):
    the first call starts the runtime and is exported at the end, the later ones draw ids
    and send traceparents but never reach the exporter."""
    import subprocess
    import sys

    from bench.children import Upstream
    from bench.gateway import prepare
    from bench.otlp_sink import OTLPSink

    upstream = Upstream(tmp_path)
    sent: dict[bool, int] = {}
    try:
        prepared = prepare(
            repo=instructions.ROOT, work=tmp_path, upstream_port=upstream.port, stub=False
        )
        for hooks_only in (False, True):
            sink = OTLPSink()
            env = {
                **prepared.env,
                "DJANGO_SETTINGS_MODULE": "router_project.settings",
                "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
                **({instructions.HOOKS_ONLY: "1"} if hooks_only else {}),
            }
            done = subprocess.run(
                [sys.executable, "-m", "bench.instructions", "--drive", "a", "5", prepared.secret],
                capture_output=True, text=True, check=False, cwd=instructions.ROOT, env=env,
            )  # fmt: skip
            sink.stop()
            assert done.returncode == 0, done.stderr[-2000:]
            assert sink.exports == 1  # all at the end (fewer than a batch)
            sent[hooks_only] = sink.bytes
    finally:
        upstream.stop()
    assert sent[False] > 4 * sent[True] > 0  # five calls' spans against the first's alone
    bad = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--hooks-only"],
        capture_output=True, text=True, check=False, cwd=instructions.ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "--hooks-only needs --cpu or --otlp" in bad.stderr
