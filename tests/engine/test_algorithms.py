"""Selection algorithms are pure functions of candidates + SelectionView."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from routing.engine.algorithms import (
    ALGORITHMS,
    Candidate,
    Latency,
    LeastBusy,
    Priority,
    RoundRobin,
    RoutingAlgorithm,
    SelectionView,
    UnknownAlgorithm,
    Weighted,
    get_algorithm,
    smooth_weighted_sequence,
)
from routing.engine.failures import FailureCode
from tests.engine.fake_algorithms import Reverse


def make(*weights: int) -> list[Candidate]:
    return [
        Candidate(key=f"p{i}/m", provider=f"p{i}", model="m", position=i, weight=w)
        for i, w in enumerate(weights)
    ]


def keys(order: Sequence[Candidate]) -> list[str]:
    return [c.key for c in order]


A, B, C = make(1, 1, 1)


def test_registry_names() -> None:
    assert set(ALGORITHMS) == {"priority", "round-robin", "weighted", "least-busy", "latency"}
    assert all(cls.name == name for name, cls in ALGORITHMS.items())
    assert [n for n, cls in ALGORITHMS.items() if cls.uses_ticket] == ["round-robin", "weighted"]


def test_priority_keeps_configured_order_even_if_given_shuffled() -> None:
    algo = Priority([C, A, B])
    assert keys(algo.order(SelectionView(ticket=7))) == ["p0/m", "p1/m", "p2/m"]


@pytest.mark.parametrize(
    ("ticket", "expected"),
    [
        (0, ["p0/m", "p1/m", "p2/m"]),
        (1, ["p1/m", "p2/m", "p0/m"]),
        (2, ["p2/m", "p0/m", "p1/m"]),
        (3, ["p0/m", "p1/m", "p2/m"]),
        (301, ["p1/m", "p2/m", "p0/m"]),
    ],
)
def test_round_robin_rotates_start(ticket: int, expected: list[str]) -> None:
    assert keys(RoundRobin([A, B, C]).order(SelectionView(ticket=ticket))) == expected


def test_round_robin_spreads_first_picks_evenly() -> None:
    algo = RoundRobin([A, B, C])
    firsts = Counter(algo.order(SelectionView(ticket=t))[0].key for t in range(300))
    assert firsts == {"p0/m": 100, "p1/m": 100, "p2/m": 100}


def test_weighted_first_picks_follow_weights_exactly() -> None:
    algo = Weighted(make(1, 2, 3))
    firsts = Counter(algo.order(SelectionView(ticket=t))[0].key for t in range(600))
    assert firsts == {"p0/m": 100, "p1/m": 200, "p2/m": 300}


def test_weighted_is_smooth() -> None:
    algo = Weighted(make(1, 2, 3))
    picks = [algo.order(SelectionView(ticket=t))[0].key for t in range(600)]
    assert picks[:6] == ["p2/m", "p1/m", "p0/m", "p2/m", "p1/m", "p2/m"]
    longest = max(len(run) for run in _runs(picks))
    assert longest == 2  # never "c c c" although c has half of the weight


def _runs(seq: list[str]) -> list[list[str]]:
    runs: list[list[str]] = [[seq[0]]]
    for item in seq[1:]:
        if item == runs[-1][-1]:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def test_weighted_fallbacks_follow_priority_order() -> None:
    algo = Weighted(make(1, 2, 3))
    assert keys(algo.order(SelectionView(ticket=0))) == ["p2/m", "p0/m", "p1/m"]
    assert keys(algo.order(SelectionView(ticket=1))) == ["p1/m", "p0/m", "p2/m"]


@pytest.mark.parametrize(
    ("weights", "sequence"),
    [
        ([1, 2, 3], [2, 1, 0, 2, 1, 2]),
        ([100, 200, 300], [2, 1, 0, 2, 1, 2]),  # gcd-reduced
        ([5, 1, 1], [0, 0, 1, 0, 2, 0, 0]),  # nginx's classic example
        ([1, 1], [0, 1]),
        ([0, 2], [1]),
        ([0, 0], []),
        ([], []),
    ],
)
def test_smooth_weighted_sequence(weights: list[int], sequence: list[int]) -> None:
    assert smooth_weighted_sequence(weights) == sequence


def test_weighted_with_all_zero_weights_is_priority() -> None:
    assert keys(Weighted(make(0, 0)).order(SelectionView(ticket=5))) == ["p0/m", "p1/m"]


@pytest.mark.parametrize(
    ("inflight", "expected"),
    [
        ({}, ["p0/m", "p1/m", "p2/m"]),
        ({"p0/m": 3, "p1/m": 1, "p2/m": 2}, ["p1/m", "p2/m", "p0/m"]),
        ({"p0/m": 2, "p1/m": 2}, ["p2/m", "p0/m", "p1/m"]),  # missing = 0; ties by position
        ({"p0/m": 1, "p1/m": 1, "p2/m": 1}, ["p0/m", "p1/m", "p2/m"]),
    ],
)
def test_least_busy(inflight: dict[str, int], expected: list[str]) -> None:
    assert keys(LeastBusy([A, B, C]).order(SelectionView(inflight=inflight))) == expected


@pytest.mark.parametrize(
    ("latency", "expected"),
    [
        ({"p0/m": 900.0, "p1/m": 200.0, "p2/m": 450.0}, ["p1/m", "p2/m", "p0/m"]),
        ({"p0/m": 100.0, "p2/m": 50.0}, ["p1/m", "p2/m", "p0/m"]),  # unknown first
        ({"p0/m": 100.0}, ["p1/m", "p2/m", "p0/m"]),  # unknowns by position
        ({"p0/m": 300.0, "p1/m": 300.0, "p2/m": float("nan")}, ["p2/m", "p0/m", "p1/m"]),
        ({}, ["p0/m", "p1/m", "p2/m"]),
    ],
)
def test_latency(latency: dict[str, float], expected: list[str]) -> None:
    assert keys(Latency([A, B, C]).order(SelectionView(latency_ms=latency))) == expected


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_order_is_pure_and_complete(name: str) -> None:
    algo = get_algorithm(name)(make(1, 2, 3))
    view = SelectionView(ticket=4, inflight={"p0/m": 1}, latency_ms={"p1/m": 5.0})
    first = algo.order(view)
    algo.on_dispatch(first[0])
    algo.on_success(first[0], 12.0)
    algo.on_failure(first[0], FailureCode.SERVER)
    assert algo.order(view) == first
    assert sorted(keys(first)) == ["p0/m", "p1/m", "p2/m"]
    assert get_algorithm(name)([]).order(view) == []


REVERSE = "tests.engine.fake_algorithms.Reverse"


def test_get_algorithm_by_name_registered_name_and_registered_path() -> None:
    assert get_algorithm("round-robin") is RoundRobin
    assert get_algorithm("mine", {"mine": REVERSE}) is Reverse
    assert get_algorithm(REVERSE, {"mine": REVERSE}) is Reverse  # by the registered path
    assert (
        get_algorithm("priority", {"priority": REVERSE}) is Priority
    )  # built-ins cannot be shadowed
    assert issubclass(Reverse, RoutingAlgorithm)
    assert keys(Reverse([A, B, C]).order(SelectionView())) == ["p2/m", "p1/m", "p0/m"]


def test_an_unregistered_dotted_path_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing runs a module's code and its error says which modules exist: a path not
    registered is refused before any import, with the same message whether it exists."""
    ran = tmp_path / "ran"
    (tmp_path / "planted_algorithm.py").write_text(
        f"open({str(ran)!r}, 'w').close()\n"
        "from routing.engine.algorithms import Priority as Planted\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    messages = set()
    for name in ("planted_algorithm.Planted", "no_such_pkg.module.Algo", REVERSE):
        with pytest.raises(UnknownAlgorithm) as refused:
            get_algorithm(name, {"mine": "tests.engine.other.Mine"})
        messages.add(str(refused.value).replace(repr(name), "NAME"))
    assert messages == {
        "unknown routing algorithm NAME: use one of latency, least-busy, priority, "
        "round-robin, weighted, mine; another algorithm must first be registered in "
        "SWITCHYARD_ALGORITHMS"
    }
    assert not ran.exists() and "planted_algorithm" not in sys.modules
    assert get_algorithm("planted_algorithm.Planted", {"x": "planted_algorithm.Planted"})
    assert ran.exists()  # the same path, registered, is imported
    sys.modules.pop("planted_algorithm", None)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "unknown routing algorithm 'mine'"),
        ("no_such_pkg.module.Algo", "cannot import module 'no_such_pkg.module'"),
        ("routing.engine.algorithms.Missing", "has no attribute 'Missing'"),
        ("tests.engine.fake_algorithms.NotAnAlgorithm", "is not a RoutingAlgorithm"),
        ("routing.engine.algorithms.get_algorithm", "is not a RoutingAlgorithm"),
        ("routing.engine.algorithms.", "unknown routing algorithm"),
    ],
)
def test_get_algorithm_rejects_a_registration_that_does_not_load(path: str, message: str) -> None:
    """The operator's own registration is imported, and its problem named (routing.E003)."""
    with pytest.raises(UnknownAlgorithm, match=message.replace(".", r"\.")):
        get_algorithm("mine", {"mine": path})
    with pytest.raises(UnknownAlgorithm, match="unknown routing algorithm 'fastest'"):
        get_algorithm("fastest")
    assert issubclass(UnknownAlgorithm, ValueError)
