"""The Spend page's chart: stacked bars per UTC day, one colour per key, group or target,
server-rendered SVG (no chart library), like ``dashboard.sparkline``.

The series are the largest ``SERIES_MAX`` by total; the rest are summed as "other". A day
without calls is an empty slot, not a missing one, so the days keep their places.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

SERIES_MAX = 6
OTHER = "other"


@dataclass(frozen=True, slots=True)
class Chart:
    svg: SafeString
    series: tuple[str, ...]  # legend order: the colour classes are spend-0 … spend-6
    metric: str  # "cost" or "tokens"
    total: float


def spend_chart(
    rows: Sequence[Mapping[str, Any]],
    *,
    days: Sequence[dt.date],
    width: int = 720,
    height: int = 160,
) -> Chart:
    """``rows`` of ``spend_by_day`` over ``days`` (oldest first)."""
    metric = "cost" if any(r["cost"] for r in rows) else "tokens"
    totals: dict[str, float] = {}
    for row in rows:
        totals[row["name"]] = totals.get(row["name"], 0.0) + float(row[metric] or 0)
    top = [name for name, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:SERIES_MAX]]
    series = tuple(top + ([OTHER] if len(totals) > len(top) else []))
    index = {day: i for i, day in enumerate(days)}
    stacks = [[0.0] * len(series) for _ in days]
    for row in rows:
        slot = index.get(row["day"])
        if slot is None:
            continue
        name = row["name"] if row["name"] in top else OTHER
        stacks[slot][series.index(name)] += float(row[metric] or 0)
    highest = max((sum(stack) for stack in stacks), default=0.0) or 1.0
    step = width / max(1, len(days))
    bar = max(1.0, step * 0.7)
    rects: list[tuple[Any, ...]] = []
    for slot, stack in enumerate(stacks):
        y = float(height)
        for position, value in enumerate(stack):
            if value <= 0:
                continue
            h = value / highest * (height - 4)
            y -= h
            label = f"{days[slot].isoformat()} {series[position]}: {value:.6g} {metric}"
            rects.append(
                (
                    round(slot * step, 1),
                    round(y, 1),
                    round(bar, 1),
                    round(h, 1),
                    position,
                    label,
                )
            )
    body = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" class="spend-{}"><title>{}</title></rect>',
        rects,
    )
    svg = format_html(
        '<svg class="spend-chart" viewBox="0 0 {} {}" width="100%" height="{}" '
        'preserveAspectRatio="none" role="img" '
        'aria-label="{} per day" data-spend-chart>{}</svg>',
        width,
        height,
        height,
        metric,
        body,
    )
    return Chart(svg, series, metric, sum(totals.values()))
