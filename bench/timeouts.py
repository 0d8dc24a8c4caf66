"""What a stream's timing looks like, direct and through the gateway, for the timeouts'
defaults (docs/outages.md, "Timeouts that fit the failure"): ``python -m bench.timeouts``.

The upstream is the simulator (``routing.simulator``) over loopback, the gateway a daphne
process set up as ``bench.run`` sets it up (group ``bench``, the shipped timeouts). For
each profile, ``--calls`` streams one after another, each path in turn; per stream:

- headers: send → response headers (what ``headers_s`` bounds);
- ttft: send → first content delta (what ``first_token_s`` bounds);
- gap: the longest wait between two reads after the first content (what ``idle_s``
  bounds).

Through the gateway the client's headers come at the commit point (the first content,
``commit: first-content``), so its headers column is its ttft; the upstream's own
time-to-headers is the direct path's.

Profiles: ``healthy`` (20 content chunks, ``--gap-ms`` apart: the model writing) and
``thinker`` (headers and the role chunk at once, then ``--think-s`` of silence before
the first token: a reasoning model whose reasoning the door does not stream). Figures
are p50 / p99 / max in milliseconds; on this shared 2-core VM they are pessimistic.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.gateway import Gateway, prepare
from bench.run import ROOT
from routing.simulator.script import Reply
from routing.simulator.server import FakeUpstream

CONTENT = " ".join(f"word{i}" for i in range(20))
CONTENT_DELTA = re.compile(r'"content":\s?"[^"]')  # not the role chunk's empty content


def one_stream(client: httpx.Client, url: str, key: str) -> tuple[float, float, float]:
    """(headers, ttft, longest gap after the first content), in seconds."""
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    started = time.perf_counter()
    ttft = None
    last = gap = 0.0
    with client.stream("POST", url, json=body, headers={"authorization": f"Bearer {key}"}) as r:
        headers = time.perf_counter() - started
        r.raise_for_status()
        for line in r.iter_lines():
            now = time.perf_counter()
            if ttft is None and line.startswith("data: {") and CONTENT_DELTA.search(line):
                ttft = now - started
                last = now
            elif ttft is not None and line:
                gap, last = max(gap, now - last), now
    assert ttft is not None, "no content came"
    return headers, ttft, gap


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"{statistics.median(ms):.1f} / {p99:.1f} / {ms[-1]:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.timeouts", description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="streams per profile and path")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="healthy: between chunks")
    parser.add_argument("--think-s", type=float, default=3.0, help="thinker: silence")
    parser.add_argument("--thinker-calls", type=int, default=5)
    args = parser.parse_args(argv)
    profiles = {
        "healthy": (Reply(CONTENT, chunks=20, chunk_delay_s=args.gap_ms / 1000), args.calls),
        "thinker": (Reply(CONTENT, chunks=20, think_s=args.think_s), args.thinker_calls),
    }
    with FakeUpstream() as upstream, tempfile.TemporaryDirectory() as work:
        prepared = prepare(repo=ROOT, work=Path(work), upstream_port=upstream.port, stub=False)
        gateway = Gateway("through", prepared)
        gateway.start()
        try:
            paths = {
                "direct": (f"{upstream.base_url}/chat/completions", "bench-upstream-key"),
                "through": (f"{gateway.url}/chat/completions", prepared.secret),
            }
            print("| profile | path | headers ms | ttft ms | longest gap ms |")
            print("|---|---|---:|---:|---:|")
            with httpx.Client(timeout=600) as client:
                for name, (reply, calls) in profiles.items():
                    upstream.script("fast", then=reply)
                    upstream.script("bench", then=reply)  # DIRECT asks for the group's name
                    for path, (url, key) in paths.items():
                        one_stream(client, url, key)  # warm: pools, the table
                        seen = [one_stream(client, url, key) for _ in range(calls)]
                        cols = [summary([s[i] for s in seen]) for i in range(3)]
                        print(f"| {name} | {path} | {' | '.join(cols)} |", flush=True)
        finally:
            gateway.stop()


if __name__ == "__main__":
    main()
