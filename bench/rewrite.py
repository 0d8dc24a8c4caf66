"""Micro-benchmark: the CPU cost of continuity on the call path (SPEC §13, issue 13).

``python -m bench.rewrite [N]`` (also run at the end of ``make bench``). It calls the
gateway's own :meth:`Continuity.outbound <routing.gateway.continuity.Continuity.outbound>`
— a new ``Continuity`` per call, as the gateway makes one per call — on an in-process
``MemoryStore`` filled the way serving fills it (``Continuity.remember`` of each assistant
turn), for a 50-turn conversation (100 messages, every assistant turn with reasoning, a
tool call every fifth turn), and times it in CPU (``time.process_time``):

- ``unswitched``: the session's every turn was served by the target now chosen: one
  store read, the history is not looked at;
- ``switched``: every turn was served by another target: fingerprint the turns, look them
  up, strip the cross-target reasoning, append the notice, build the body;
- ``tool-loop``: unswitched, to a target with ``break_tool_loop`` (which reads the
  history whatever the provenance; the conversation does not end with a tool result);
- ``serialize``: ``orjson.dumps`` of the same body, which every call pays anyway — the
  ratio column is against it (the ratio holds better than the absolute time on a loaded
  machine).

The in-process store answers without suspending, so each coroutine is driven by hand (no
event loop in the measurement). Each case reports the best of seven batches.

The budget is 0.2 ms CPU for the switched case; nothing here is asserted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson

from routing.engine.algorithms import Candidate
from routing.engine.targets import target_key
from routing.gateway.continuity import Continuity, Scope, ServedTurn
from routing.gateway.table import ProviderSpec, TargetSpec
from routing.state.memory import MemoryStore
from routing.upstream.openai import Timeouts

TURNS = 50
BUDGET_MS = 0.2
T = TypeVar("T")


def conversation(turns: int = TURNS) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"step {i}: " + "please continue " * 20})
        turn: dict[str, Any] = {
            "role": "assistant",
            "content": f"answer {i} " + "lorem ipsum dolor " * 30,
            "reasoning_content": f"thinking {i} " + "considering options " * 40,
        }
        if i % 5 == 4:
            turn["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "run", "arguments": "{}"},
                }
            ]
        messages.append(turn)
    messages.append({"role": "user", "content": "go on"})
    return {"model": "auto", "stream": True, "messages": messages}


def target(provider: str, model: str, **options: Any) -> TargetSpec:
    spec = ProviderSpec(provider, "openai", "http://127.0.0.1:9/v1", "k", {}, Timeouts(), 1)
    return TargetSpec(
        Candidate(target_key(provider, model), provider, model, 0), spec, model, None, **options
    )


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-process store's) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the store suspended: bench.rewrite needs an in-process store")


def served_by(store: MemoryStore, scope: Scope, body: dict[str, Any], who: TargetSpec) -> None:
    """Fill ``store`` as serving would have: ``who`` produced every assistant turn."""
    remember = Continuity(store, body, scope).remember
    for message in body["messages"]:
        if message["role"] == "assistant":
            turn = ServedTurn.from_completion({"choices": [{"message": message}]})
            run_now(remember(who, turn))


def _cpu_ms(fn: Callable[[], object], n: int, repeats: int = 7) -> float:
    """CPU per call: the best of ``repeats`` batches of ``n // repeats`` calls, as timeit
    advises — on a shared machine the slower batches measure the neighbours, not us."""
    fn()
    batch = max(1, n // repeats)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(batch):
            fn()
        best = min(best, (time.process_time() - start) * 1000 / batch)
    return best


def measure(n: int = 2000) -> dict[str, float]:
    body = conversation()
    a, b = target("p1", "a"), target("p2", "b")
    looping = target("p1", "a", break_tool_loop=True)
    store, scope = MemoryStore(), Scope("bench-session")
    served_by(store, scope, body, a)

    def outbound(to: TargetSpec) -> tuple[dict[str, Any], list[str]]:
        return run_now(Continuity(store, body, scope).outbound(to))

    # what is timed is what it should be: a rewrite across the switch, nothing without it
    assert outbound(b)[1] == [f"strip-reasoning:{TURNS}", "model-changed-notice"]
    assert outbound(a)[1] == [] and outbound(looping)[1] == []
    return {
        "unswitched": _cpu_ms(lambda: outbound(a), n * 10),
        "switched": _cpu_ms(lambda: outbound(b), n),
        "tool-loop": _cpu_ms(lambda: outbound(looping), n),
        "serialize": _cpu_ms(lambda: orjson.dumps(body), n),
    }


def report(n: int = 2000) -> str:
    ms = measure(n)
    lines = [
        f"history rewriting, {TURNS}-turn conversation "
        "(Continuity.outbound, CPU per call, in process):",
        f"  {'case':<12} {'ms':>8} {'x serialize':>12}",
    ]
    for case in ("unswitched", "switched", "tool-loop", "serialize"):
        lines.append(f"  {case:<12} {ms[case]:>8.4f} {ms[case] / ms['serialize']:>12.2f}")
    verdict = "within" if ms["switched"] <= BUDGET_MS else "OVER"
    lines.append(f"  switched: {verdict} the {BUDGET_MS} ms budget")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
