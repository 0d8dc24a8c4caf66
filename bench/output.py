"""The printed report: machine and method header, the table, checks and notes."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import report

if TYPE_CHECKING:
    from bench.run import Runner, Scenario


def _checks(rows: list[report.Row]) -> list[str]:
    """Is the load generator the bottleneck? How often was the failover really priced?"""
    notes = []
    by_scenario: dict[str, list[report.Row]] = {}
    for row in rows:
        by_scenario.setdefault(row.scenario, []).append(row)
    for key, group in by_scenario.items():
        direct, measured = group[0], [r for r in group[1:] if r.rounds and not r.unavailable]
        if not direct.rounds or not measured:
            continue
        d_rps = direct.med(lambda r: r["rps"]) or 0.0
        ratios = ", ".join(
            f"{d_rps / (r.med(lambda x: x['rps']) or float('nan')):.1f}x {r.path}" for r in measured
        )
        client = max(x["client_cpu_util"] for r in measured for x in r.rounds)
        verdict = "ok" if client < 0.8 else "THE CLIENT MAY BE THE LIMIT"
        notes.append(
            f"{key}: direct/gateway req/s {ratios}; load generator CPU <= {client:.0%} "
            f"in gateway rounds ({verdict})"
        )
        cores = [x["gateway_core"] for r in measured for x in r.rounds if "gateway_core" in x]
        if cores:
            share = {
                k: statistics.median(c[k] for c in cores) for k in ("busy", "gateway", "other")
            }
            crowded = (
                " -- CROWDED: other work competed for the gateway's core"
                if share["other"] > 0.1
                else ""
            )
            notes.append(
                f"{key}: gateway core busy {share['busy']:.0%} in gateway rounds "
                f"(gateway {share['gateway']:.0%}, other processes "
                f"{share['other']:.0%}){crowded}"
            )
        for row in measured:
            split = [x.get("gateway_cpu_s_by_process") or [] for x in row.rounds]
            if any(len(s) > 1 for s in split):
                totals = [sum(v) for v in zip(*split, strict=False)]
                shares = "/".join(f"{t / max(sum(totals), 1e-9):.0%}" for t in totals)
                notes.append(
                    f"{key} {row.path}: gateway CPU split across processes {shares} "
                    "(the kernel hashes each connection to one process)"
                )
            calls = sum(x["completed"] for x in row.rounds)
            failed = sum(x["upstream"].get("fail503 503", 0) for x in row.rounds)
            if failed or key in ("e", "f"):
                notes.append(
                    f"{key} {row.path}: the failing first target was tried on {failed} "
                    f"of {calls} calls ({failed / max(calls, 1):.1%})"
                )
        scaling = _scaling(key, measured)
        if scaling:
            notes.append(scaling)
    return notes


def _scaling(key: str, measured: list[report.Row]) -> str | None:
    """What a second worker gave, two ways. Measured: req/s of ``redis x2`` over ``redis
    x1`` — on a 2-core machine the second worker shares its core with the load generator,
    the upstream and redis-server, so this is a lower bound. CPU-accounted: 2 × (CPU per
    call with one worker) ÷ (CPU per call with two) — the throughput two workers give on two
    cores of their own when each call costs what it cost here (the load generator and
    upstream elsewhere); it is what the per-call CPU says scaling loses to sharing state."""
    rows = {r.path: r for r in measured}
    one, two = rows.get("redis x1"), rows.get("redis x2")
    if one is None or two is None:
        return None
    rps1, rps2 = one.med(lambda r: r["rps"]), two.med(lambda r: r["rps"])
    cpu1 = one.med(lambda r: r.get("gateway_cpu_ms_per_req"))
    cpu2 = two.med(lambda r: r.get("gateway_cpu_ms_per_req"))
    if not (rps1 and rps2 and cpu1 and cpu2):
        return None
    return (
        f"{key}: two workers against one: {rps2 / rps1:.2f}x req/s measured (the second "
        f"worker shares its core with the load generator, upstream and redis), "
        f"{2 * cpu1 / cpu2:.2f}x CPU-accounted (2 x {cpu1:.2f} / {cpu2:.2f} ms per call: "
        "two cores of their own)"
    )


def render(
    *,
    args: argparse.Namespace,
    info: Mapping[str, str],
    rows: list[report.Row],
    runner: Runner,
    soak: dict[str, Any] | None,
    load: tuple[str, str],
    steal: float,
    wall: float,
    work: Path,
    scenarios: Mapping[str, Scenario],
) -> str:
    base: dict[str, report.Row] = {r.scenario: r for r in rows if r.path == "direct"}
    values = [r.values(base.get(r.scenario)) for r in rows]
    mode = f"open loop at {args.rate:g} req/s" if args.rate else "closed loop"
    server = args.server + (" -v 0 (no access log)" if args.quiet_server else " (default logging)")
    if args.stub:
        server += " serving bench.stub_gateway (NOT Switchyard)"
    gw = ",".join(map(str, sorted(runner.gateway_cpus))) if runner.gateway_cpus else "not pinned"
    client = ",".join(map(str, sorted(runner.client_cpus))) if runner.client_cpus else "not pinned"
    out = [
        f"Switchyard benchmark, {info['date']}",
        f"machine: nproc {info['nproc']} (usable cpus {info['usable_cpus']}), {info['cpu_model']}, "
        f"kernel {info['kernel']}, python {info['python']}",
        f"pinning: gateway -> cpu {gw} (verified Cpus_allowed_list: {runner.gateway_pinning}); "
        f"driver, load generator, upstream, redis -> cpu {client}",
        f"load: loadavg {load[0]} before, {load[1]} after; CPU steal {steal:.1%} during the run",
        f"method: {mode}; {server}; "
        + (
            f"per path {args.rounds} x {args.duration:g} s rounds, alternating ABBA, after a "
            f"{args.warmup:g} s warm-up; medians; '+' columns = median paired difference vs "
            "direct"
            if args.keys
            else "soak only"
        ),
        "",
    ]
    if values:
        out += [report.aligned(values), ""]
        out += ["scenarios:"]
        out += [f"  {k}  {s.title}" for k, s in scenarios.items() if k in args.keys]
    notes = _checks(rows) + runner.notes
    if runner.idle_cpu:
        notes.append(
            f"gateway CPU while idle (during direct rounds): "
            f"{statistics.median(runner.idle_cpu):.1f} ms/s"
        )
    if runner.unavailable:
        notes.append(runner.unavailable)
    for row in rows:
        if row.unavailable and "\n" in row.unavailable and row.unavailable != runner.unavailable:
            notes.append(f"{row.scenario} {row.path}: {row.unavailable}")
    if soak is not None:
        if "unavailable" in soak:
            notes.append(f"soak: n/a: {soak['unavailable']}")
        else:
            series = ", ".join(f"{t:.0f}s {mb:.1f}" for t, mb in soak["samples"])
            settled = next((mb for t, mb in soak["samples"] if t >= 9.5), soak["last"])
            notes.append(
                f"soak {args.soak:g} s at c=32: RSS MB first {soak['first']:.1f}, last "
                f"{soak['last']:.1f}, max {soak['max']:.1f} "
                f"(growth {soak['last'] - soak['first']:+.1f}, "
                f"{soak['last'] - settled:+.1f} after the first 10 s); "
                f"peak {soak['peak_hwm'] or 0:.1f}; {soak['completed']} calls, "
                f"{soak['rps'] or 0:.0f} req/s, errors {soak['errors'] or 0}; samples: {series}"
            )
    if notes:
        out += ["", "notes:"] + [f"  - {n}" for n in notes]
    if args.markdown and values:
        out += ["", report.markdown(values)]
    out += ["", f"wall time {wall:.0f} s" + (f"; logs in {work}" if args.keep else "")]
    return "\n".join(out)


def raw(
    rows: list[report.Row], soak: dict[str, Any] | None, info: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "machine": dict(info),
        "soak": soak,
        "rows": [
            {
                "scenario": r.scenario,
                "path": r.path,
                "unavailable": r.unavailable,
                "peak_rss_mb": r.peak_mb,
                "rounds": r.rounds,
            }
            for r in rows
        ],
    }
