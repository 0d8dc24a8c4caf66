"""A group's declared context window (SPEC §13, seed 003).

Agents compact their history at a threshold computed from the window a model *declares*:
``threshold = floor(min(cw * 0.8, cw - 65536))``. ``compact_window`` T asks for
compaction near T, so the declared window is that rule's inverse::

    cw = max(ceil(T * 1.25), T + 65536)        # 500000 -> 625000

Precedence: the group's ``context_window``; else ``compact_window`` → the inverse; else
the smallest window its targets declare; else 65536 (rather compact early than promise a
window an upstream does not have). Below ``MIN_USABLE_COMPACT`` the compaction engine's
own check (retained tail < threshold) fails every turn, and a declared window of 65536 or
less leaves it no budget at all: both are accepted, with a warning.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

HEADROOM_TOKENS = 65536
FALLBACK_WINDOW = 65536
MIN_USABLE_COMPACT = 12484  # smallest T with floor(0.16 * (T + 65536)) < T


def window_for_compact(compact: int) -> int:
    """``max(ceil(T * 1.25), T + 65536)`` in integers."""
    return max((compact * 5 + 3) // 4, compact + HEADROOM_TOKENS)


@dataclass(frozen=True, slots=True)
class DeclaredWindow:
    tokens: int
    source: str  # context_window | compact_window | targets | fallback


def declared_window(
    context_window: int | None, compact_window: int | None, target_windows: Iterable[int | None]
) -> DeclaredWindow:
    if context_window is not None:
        return DeclaredWindow(context_window, "context_window")
    if compact_window is not None:
        return DeclaredWindow(window_for_compact(compact_window), "compact_window")
    declared = [w for w in target_windows if w is not None]
    if declared:
        return DeclaredWindow(min(declared), "targets")
    return DeclaredWindow(FALLBACK_WINDOW, "fallback")


def window_warnings(context_window: int | None, compact_window: int | None) -> list[str]:
    """Warnings for values that are accepted but defeat compaction."""
    warnings: list[str] = []
    if compact_window is not None and compact_window < MIN_USABLE_COMPACT:
        warnings.append(
            f"compact_window {compact_window} is below {MIN_USABLE_COMPACT}: the compaction "
            "engine's retained tail would not fit under its threshold, so it never compacts"
        )
    if context_window is not None and context_window <= HEADROOM_TOKENS:
        warnings.append(
            f"context_window {context_window} is not above {HEADROOM_TOKENS}: a compaction "
            "engine with 65536 tokens of headroom has no budget left and never compacts"
        )
    return warnings
