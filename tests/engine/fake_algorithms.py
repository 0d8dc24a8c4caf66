"""Third-party-style algorithms that tests load by dotted path."""

from __future__ import annotations

from routing.engine.algorithms import Candidate, RoutingAlgorithm, SelectionView


class Reverse(RoutingAlgorithm):
    name = "reverse"

    def order(self, view: SelectionView) -> list[Candidate]:
        return list(reversed(self.candidates))


class NotAnAlgorithm:
    name = "nope"
