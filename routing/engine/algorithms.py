"""Selection algorithms: a registry of named classes, extensible by dotted path.

Interface for third-party algorithms (subclass :class:`RoutingAlgorithm`):

- ``name``: the registry name; ``uses_ticket``: set True when :meth:`order` reads
  ``view.ticket``, so the driver takes one value from the group's atomic counter per call
  (that is how a rotation advances at dispatch and spreads concurrent calls, across
  processes when the store is Redis). ``uses_inflight`` / ``uses_latency``: set True when
  :meth:`order` reads ``view.inflight`` / ``view.latency_ms``, so the driver keeps those
  counts (they cost a store write per attempt or per success, so only on request).
- ``__init__(candidates)``: called once per compiled group with the enabled targets.
- ``order(view)``: PURE. Return every candidate in preference order, using only the
  candidates and the :class:`SelectionView` facts. The driver drops unhealthy or already
  tried targets itself, so an algorithm never needs to know about health, and selection
  may be called speculatively (status pages) without side effects.
- ``on_dispatch / on_success / on_failure``: hooks for state an algorithm keeps itself;
  the built-ins keep none (shared state — cursors, in-flight counts, latency averages —
  lives in the state store and arrives through the view).

Register with ``get_algorithm(name, extra={"mine": "pkg.module.MyAlgorithm"})``; a group may
then name it ``mine`` or by the registered path. Only registered paths are ever imported
(the operator's ``SWITCHYARD_ALGORITHMS``): a path written in a group is not code to run.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import ClassVar

from .failures import FailureCode


@dataclass(frozen=True, slots=True)
class Candidate:
    key: str  # "provider/model"
    provider: str
    model: str
    position: int
    weight: int = 1


@dataclass(frozen=True, slots=True)
class SelectionView:
    """Facts the driver fetched before selecting; selection is a pure function of these."""

    ticket: int = 0  # per-group atomic counter value for this call (only fetched if uses_ticket)
    inflight: Mapping[str, int] = field(default_factory=dict)
    latency_ms: Mapping[str, float] = field(default_factory=dict)  # moving average TTFT


class RoutingAlgorithm:
    """Base class; on its own it is the priority order."""

    name: ClassVar[str]
    uses_ticket: ClassVar[bool] = False
    uses_inflight: ClassVar[bool] = False  # the driver counts in-flight calls per target
    uses_latency: ClassVar[bool] = False  # the driver records time to first token on success

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.candidates: tuple[Candidate, ...] = tuple(sorted(candidates, key=_by_position))

    def order(self, view: SelectionView) -> list[Candidate]:
        return list(self.candidates)

    def on_dispatch(self, candidate: Candidate) -> None:
        return None

    def on_success(self, candidate: Candidate, ttft_ms: float | None) -> None:
        return None

    def on_failure(self, candidate: Candidate, code: FailureCode) -> None:
        return None


def _by_position(c: Candidate) -> int:
    return c.position


class Priority(RoutingAlgorithm):
    """The configured order; the first eligible target wins."""

    name = "priority"


class RoundRobin(RoutingAlgorithm):
    """Rotate the start by ``ticket % n``; the rest follow in configured order."""

    name = "round-robin"
    uses_ticket = True

    def order(self, view: SelectionView) -> list[Candidate]:
        if not self.candidates:
            return []
        start = view.ticket % len(self.candidates)
        return list(self.candidates[start:] + self.candidates[:start])


def smooth_weighted_sequence(weights: Sequence[int]) -> list[int]:
    """nginx's smooth weighted round-robin, unrolled into one full cycle of indexes.

    Each step every entry gains its weight, the largest (earliest on ties) is picked and
    loses the total. Weights 1:2:3 give ``2 1 0 2 1 2``: the heavy target never runs three
    in a row. Weights are divided by their gcd first (100:200:300 is the same cycle, and
    six entries long rather than six hundred); weights <= 0 never come first.
    """
    positive = [max(w, 0) for w in weights]
    divisor = reduce(math.gcd, positive, 0)
    if divisor == 0:
        return []
    scaled = [w // divisor for w in positive]
    total = sum(scaled)
    current = [0] * len(scaled)
    sequence: list[int] = []
    for _ in range(total):
        for i, w in enumerate(scaled):
            current[i] += w
        best = max(range(len(current)), key=lambda i: (current[i], -i))
        current[best] -= total
        sequence.append(best)
    return sequence


class Weighted(RoutingAlgorithm):
    """First pick from the smooth weighted cycle at ``ticket``; fallbacks in priority order."""

    name = "weighted"
    uses_ticket = True

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        super().__init__(candidates)
        self.sequence = smooth_weighted_sequence([c.weight for c in self.candidates])

    def order(self, view: SelectionView) -> list[Candidate]:
        if not self.sequence:  # every weight is zero: plain priority
            return list(self.candidates)
        first = self.candidates[self.sequence[view.ticket % len(self.sequence)]]
        return [first, *(c for c in self.candidates if c is not first)]


class LeastBusy(RoutingAlgorithm):
    """Fewest calls in flight first; ties keep the configured order."""

    name = "least-busy"
    uses_inflight = True

    def order(self, view: SelectionView) -> list[Candidate]:
        return sorted(self.candidates, key=lambda c: (view.inflight.get(c.key, 0), c.position))


class Latency(RoutingAlgorithm):
    """Lowest moving-average time to first token first.

    A target without a measurement sorts first so it gets measured at all; otherwise a
    newcomer would never be chosen over a known-fast target and never get a number.
    """

    name = "latency"
    uses_latency = True

    def order(self, view: SelectionView) -> list[Candidate]:
        def rank(c: Candidate) -> tuple[int, float, int]:
            ms = view.latency_ms.get(c.key)
            if ms is None or math.isnan(ms):
                return (0, 0.0, c.position)
            return (1, ms, c.position)

        return sorted(self.candidates, key=rank)


ALGORITHMS: dict[str, type[RoutingAlgorithm]] = {
    cls.name: cls for cls in (Priority, RoundRobin, Weighted, LeastBusy, Latency)
}


class UnknownAlgorithm(ValueError):
    """The configured algorithm is neither built in nor registered, or a registered path
    is not an importable subclass."""


def get_algorithm(name: str, extra: Mapping[str, str] | None = None) -> type[RoutingAlgorithm]:
    """Resolve a built-in name, a name registered in ``extra``, or a dotted path that
    ``extra`` registers (one of its values).

    Nothing else is imported: importing a module runs its code, and the error of a
    failed import tells whoever wrote the name which modules exist. So an unregistered
    path is refused with the same message as an unknown name, before any import; only
    the operator's own registrations (``SWITCHYARD_ALGORITHMS``) are ever imported.
    """
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    registered = extra or {}
    path = registered.get(name) or (name if name in registered.values() else "")
    module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise UnknownAlgorithm(
            f"unknown routing algorithm {name!r}: use one of "
            f"{', '.join([*sorted(ALGORITHMS), *sorted(registered)])}; another algorithm must "
            "first be registered in SWITCHYARD_ALGORITHMS"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownAlgorithm(
            f"routing algorithm {name!r}: cannot import module {module_name!r} ({exc})"
        ) from exc
    try:
        found = getattr(module, attr)
    except AttributeError as exc:
        raise UnknownAlgorithm(
            f"routing algorithm {name!r}: module {module_name!r} has no attribute {attr!r}"
        ) from exc
    if not (isinstance(found, type) and issubclass(found, RoutingAlgorithm)):
        raise UnknownAlgorithm(f"routing algorithm {name!r}: {path!r} is not a RoutingAlgorithm")
    return found
