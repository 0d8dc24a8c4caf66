"""Reducing rounds to one row per (scenario, path) and printing the tables.

Every figure is the median over the measured rounds. "Added" columns are the median
of *paired* differences (THROUGH round i minus the DIRECT round i run next to it),
which cancels most of the drift a noisy machine adds between rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Round = dict[str, Any]


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _lat(key: str, q: str) -> Callable[[Round], float | None]:
    return lambda r: r[key][q]


@dataclass
class Row:
    scenario: str
    path: str
    rounds: list[Round] = field(default_factory=list)
    unavailable: str | None = None
    peak_mb: float | None = None

    def med(self, get: Callable[[Round], float | None]) -> float | None:
        return _median(get(r) for r in self.rounds)

    def added(self, base: Row | None, get: Callable[[Round], float | None]) -> float | None:
        if base is None or base is self or not base.rounds:
            return None
        pairs = zip(self.rounds, base.rounds, strict=False)
        return _median(
            (a - b)
            for a, b in ((get(x), get(y)) for x, y in pairs)
            if a is not None and b is not None
        )

    def values(self, base: Row | None) -> dict[str, float | int | str | None]:
        if self.unavailable:
            return {"scenario": self.scenario, "path": self.path, "note": self.unavailable}
        p50, p99 = _lat("latency_ms", "p50"), _lat("latency_ms", "p99")
        ttft = _lat("ttft_ms", "p50")
        return {
            "scenario": self.scenario,
            "path": self.path,
            "rps": self.med(lambda r: r["rps"]),
            "p50": self.med(p50),
            "p99": self.med(p99),
            "add_p50": self.added(base, p50),
            "add_p99": self.added(base, p99),
            "ttft_p50": self.med(ttft),
            "add_ttft_p50": self.added(base, ttft),
            "cpu_ms_per_req": self.med(lambda r: r.get("gateway_cpu_ms_per_req")),
            "store_ms_per_req": self.med(lambda r: r.get("store_cpu_ms_per_req")),
            "peak_rss_mb": self.peak_mb,
            "errors": sum(r["error_count"] for r in self.rounds),
            "overhead_ms": self.med(lambda r: r.get("overhead_ms_mean")),
            "attempts": self.med(lambda r: r.get("attempts_mean")),
        }


COLUMNS: list[tuple[str, str, str]] = [
    # key, header, format
    ("scenario", "scen", "s"),
    ("path", "path", "s"),
    ("rps", "req/s", ".0f"),
    ("p50", "p50 ms", ".2f"),
    ("p99", "p99 ms", ".2f"),
    ("add_p50", "+p50 ms", "+.2f"),
    ("add_p99", "+p99 ms", "+.2f"),
    ("ttft_p50", "TTFT p50", ".2f"),
    ("add_ttft_p50", "+TTFT p50", "+.2f"),
    ("cpu_ms_per_req", "CPU ms/req", ".2f"),
    ("store_ms_per_req", "redis ms/req", ".3f"),
    ("peak_rss_mb", "peak RSS MB", ".0f"),
    ("errors", "errors", "d"),
    ("overhead_ms", "ovh hdr ms", ".2f"),
    ("attempts", "attempts", ".2f"),
]


def _cell(value: object, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "s":
        return str(value)
    return format(value, fmt)


def _columns(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Drop the Redis column when no row has a value for it."""
    keep = [
        c
        for c in COLUMNS
        if c[0] != "store_ms_per_req" or any(r.get("store_ms_per_req") is not None for r in rows)
    ]
    return keep


def _cells(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    columns = _columns(rows)
    headers = [c[1] for c in columns]
    body = []
    for row in rows:
        if "note" in row:
            body.append([row["scenario"], row["path"], f"n/a: {row['note'].splitlines()[0][:90]}"])
        else:
            body.append([_cell(row.get(k), f) for k, _, f in columns])
    return headers, body


def aligned(rows: Sequence[dict[str, Any]]) -> str:
    headers, body = _cells(rows)
    widths = [len(h) for h in headers]
    for line in body:
        if len(line) == len(headers):
            widths = [max(w, len(c)) for w, c in zip(widths, line, strict=True)]

    def fmt(line: list[str]) -> str:
        if len(line) != len(headers):  # an n/a row spans the numeric columns
            first = "  ".join(c.ljust(w) for c, w in zip(line[:2], widths, strict=False))
            return first + "  " + line[2]
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(line) for line in body)])


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    headers, body = _cells(rows)
    out = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|",
    ]
    for line in body:
        cells = line if len(line) == len(headers) else line + [""] * (len(headers) - len(line))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
