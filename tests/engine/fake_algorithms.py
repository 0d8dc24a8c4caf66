"""Third-party-style algorithms that tests load by dotted path."""

from __future__ import annotations

from collections.abc import Sequence

from routing.engine.algorithms import Candidate, RoutingAlgorithm, SelectionView


class Reverse(RoutingAlgorithm):
    name = "reverse"

    def order(self, view: SelectionView) -> list[Candidate]:
        return list(reversed(self.candidates))


class NotAnAlgorithm:
    name = "nope"


class Learning(RoutingAlgorithm):
    """Keeps state of its own in its hooks (as a third-party algorithm may): the number of
    dispatches it has seen, which configuration changes elsewhere must not reset."""

    name = "learning"

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        super().__init__(candidates)
        self.dispatches = 0

    def on_dispatch(self, candidate: Candidate) -> None:
        self.dispatches += 1
