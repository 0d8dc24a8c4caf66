"""Small server-rendered SVG sparklines (no chart library, no CDN).

A sparkline is a polyline over equally spaced values, oldest first; ``None`` (no data in
that slot) breaks the line, so a quiet minute is a gap rather than a fake zero. Values are
scaled to ``[low, high]`` (given, or the data's own range). Colours come from CSS
(``currentColor`` and the ``spark`` classes), so dark mode needs nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe


def _segments(
    values: Sequence[float | None], width: float, height: float, low: float, high: float
) -> list[list[tuple[float, float]]]:
    span = high - low or 1.0
    step = width / max(1, len(values) - 1)
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for index, value in enumerate(values):
        if value is None:
            if current:
                segments.append(current)
            current = []
            continue
        clamped = min(max(value, low), high)
        y = height - 1 - (clamped - low) / span * (height - 2)
        current.append((round(index * step, 1), round(y, 1)))
    if current:
        segments.append(current)
    return segments


def sparkline(
    values: Sequence[float | None],
    *,
    label: str,
    width: int = 120,
    height: int = 24,
    low: float | None = None,
    high: float | None = None,
    css_class: str = "spark",
) -> SafeString:
    """An inline ``<svg>`` with one ``<polyline>`` per unbroken run (a lone point is a dot)."""
    known = [v for v in values if v is not None]
    lo = low if low is not None else (min(known) if known else 0.0)
    hi = high if high is not None else (max(known) if known else 1.0)
    shapes: list[str] = []
    for segment in _segments(values, width, height, lo, hi):
        if len(segment) == 1:
            x, y = segment[0]
            shapes.append(format_html('<circle cx="{}" cy="{}" r="1.5"/>', x, y))
        else:
            points = " ".join(f"{x},{y}" for x, y in segment)
            shapes.append(format_html('<polyline points="{}"/>', points))
    body = mark_safe("".join(shapes)) if shapes else mark_safe("")
    return format_html(
        '<svg class="{}" role="img" aria-label="{}" width="{}" height="{}" viewBox="0 0 {} {}" '
        'preserveAspectRatio="none">{}</svg>',
        css_class,
        label,
        width,
        height,
        width,
        height,
        body,
    )
