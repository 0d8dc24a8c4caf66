"""The continuity layer of the call path (routing.gateway.continuity) over an in-process
store, without sockets: a streamed turn's running fingerprint, what a stream holds for it,
and a history the views trip on. The end-to-end behaviour is in tests/continuity/test_across_a_switch.py."""

from __future__ import annotations

import asyncio
import sys
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from routing.continuity import provenance
from routing.continuity.chat import ChatHistory
from routing.continuity.messages import MessagesHistory
from routing.continuity.provenance import SESSION_TURNS_LIMIT, fingerprint_of
from routing.continuity.responses import ResponsesHistory
from routing.engine.algorithms import Candidate
from routing.gateway import continuity as gateway
from routing.gateway.continuity import STATS, UNREWRITABLE, Continuity, Scope, ServedTurn
from routing.gateway.table import ProviderSpec, TargetSpec
from routing.state.memory import MemoryStore
from routing.upstream.openai import Timeouts

TEXT = "Sunny in Paris — 21 °C, 晴れ 🌤️ and a surrogate half \ud83c."
REASONING = "Need the weather tool; the user asked about Paris. ✓"
CALL_IDS = ["call_1", "toolu_02"]


def target(provider: str, model: str, **options: Any) -> TargetSpec:
    spec = ProviderSpec(provider, "openai", "http://127.0.0.1:9/v1", "k", {}, Timeouts(), 1)
    candidate = Candidate(f"{provider}/{model}", provider, model, 0)
    return TargetSpec(candidate, spec, model, None, **options)


def pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def chunk(**delta: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta}]}


def streamed(text: str, reasoning: str, call_ids: list[str], size: int) -> ServedTurn:
    turn = ServedTurn()
    turn.feed(chunk(role="assistant"))
    for piece in pieces(reasoning, size):
        turn.feed(chunk(reasoning_content=piece))
    for piece in pieces(text, size):
        turn.feed(chunk(content=piece))
    for call_id in call_ids:
        turn.feed(chunk(tool_calls=[{"index": 0, "id": call_id, "function": {"name": "f"}}]))
        turn.feed(chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"a": 1}'}}]))
    turn.feed({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "x"}]})
    return turn


def as_chat(text: str, reasoning: str, call_ids: list[str]) -> str | None:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if call_ids:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in call_ids
        ]
    return ChatHistory({"messages": [{"role": "user", "content": "q"}, message]}).fingerprint(1)


def as_messages(text: str, reasoning: str, call_ids: list[str]) -> str | None:
    blocks: list[dict[str, Any]] = []
    if reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": "sig"})
    if text:
        blocks.append({"type": "text", "text": text})
    blocks += [{"type": "tool_use", "id": i, "name": "f", "input": {}} for i in call_ids]
    body = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": blocks}]
    }
    return MessagesHistory(body).fingerprint(1)


def as_responses(text: str, reasoning: str, call_ids: list[str]) -> str | None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    if reasoning:
        summary = [{"type": "summary_text", "text": reasoning}]
        items.append({"type": "reasoning", "id": "rs_1", "summary": summary})
    if text:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        items.append({"type": "message", "role": "assistant", "content": content})
    items += [
        {"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"} for i in call_ids
    ]
    return ResponsesHistory({"input": items}).fingerprint(1)


@pytest.mark.parametrize("size", [1, 3, 64])
@pytest.mark.parametrize(
    ("text", "reasoning", "call_ids"),
    [
        (TEXT, REASONING, []),
        (TEXT, REASONING, CALL_IDS),
        ("", REASONING, CALL_IDS),
        ("", REASONING, []),  # a reasoning-only turn is known by its reasoning
        ("", "", []),
    ],
    ids=["text", "text+tools", "tools", "reasoning-only", "nothing"],
)
def test_a_turn_streamed_in_pieces_has_the_fingerprint_its_history_turn_has(
    size: int, text: str, reasoning: str, call_ids: list[str]
) -> None:
    turn = streamed(text, reasoning, call_ids, size)
    expected = fingerprint_of(text, call_ids, reasoning)
    assert turn.fingerprint() == expected
    assert turn.response_id == "chatcmpl-1"
    # … and it is what each view computes when the client sends the turn back
    assert as_chat(text, reasoning, call_ids) == expected
    if expected is None:
        return
    # the SDK-shaped doors carry valid text only (no half surrogate)
    text = text.replace("\ud83c", "")
    expected = streamed(text, reasoning, call_ids, size).fingerprint()
    assert expected == fingerprint_of(text, call_ids, reasoning)
    assert as_messages(text, reasoning, call_ids) == expected
    assert as_responses(text, reasoning, call_ids) == expected


def test_a_long_stream_holds_constant_memory_for_provenance() -> None:
    """3,000 reasoning deltas and 3,000 text deltas, each chunk gone once relayed (as on
    the call path): the turn keeps a few numbers, not the deltas (a list of them held
    ~60 B a delta for the life of the stream)."""
    # Only what is allocated here and in the layer counts: the live gateway's threads
    # allocate too while this runs.
    mine = [tracemalloc.Filter(True, m.__file__ or "") for m in (sys.modules[__name__], gateway)]
    mine.append(tracemalloc.Filter(True, provenance.__file__ or ""))
    turn = ServedTurn()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(mine)
        for i in range(3000):
            turn.feed(chunk(reasoning_content=f"thought {i:05d} "))
        for i in range(3000):
            turn.feed(chunk(content=f"word {i:05d} "))
        after = tracemalloc.take_snapshot().filter_traces(mine)
    finally:
        tracemalloc.stop()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert held < 2_000, f"the turn holds {held} bytes after 6,000 deltas"
    text = "".join(f"word {i:05d} " for i in range(3000))
    assert turn.fingerprint() == fingerprint_of(text, [])


class TrippingHistory(ChatHistory):
    """A view that accepts the shape and then trips on it (what a view bug looks like)."""

    def fingerprint(self, turn: int) -> str | None:
        raise TypeError("'bool' object is not iterable")


def test_any_failure_to_read_a_history_passes_it_through_counted_once() -> None:
    store = MemoryStore()
    a, b = target("p1", "a"), target("p2", "b")
    body = {
        "model": "auto",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "x", "reasoning_content": "r"},
            {"role": "user", "content": "q2"},
        ],
    }

    async def run() -> list[tuple[dict[str, Any], list[str]]]:
        scope = Scope("s1")
        await store.provenance_record(
            scope.name, "fp-of-another-turn", a.key, response_id=None, ttl_s=60, limit=8
        )
        await store.provenance_record(
            scope.name, "fp-of-a-third-turn", b.key, response_id=None, ttl_s=60, limit=8
        )
        continuity = Continuity(store, body, scope, view=TrippingHistory)
        return [await continuity.outbound(b), await continuity.outbound(a)]

    before = STATS.unrewritable
    outcomes = asyncio.run(run())
    for outbound, rewrites in outcomes:
        assert outbound["messages"] is body["messages"]  # untouched: the very same list
        assert rewrites == [UNREWRITABLE]
    assert STATS.unrewritable == before + 1  # one call, counted once across its attempts


def test_calls_without_a_session_are_scoped_by_group_and_key() -> None:
    assert Scope("s1", "auto", 7).name == "s1"  # a session spans groups and keys
    names = {Scope(None, g, k).name for g in ("auto", "keep") for k in (7, 8, None)}
    assert len(names) == 6
    assert Scope(None, "auto", 7).name != Scope("auto", "", None).name


def test_a_sessionless_scope_keeps_the_shared_turn_limit() -> None:
    store, a = MemoryStore(), target("p1", "a")
    scope = Scope(None, "auto", 7)

    async def run() -> dict[str, str]:
        continuity = Continuity(store, {"messages": []}, scope)
        for i in range(SESSION_TURNS_LIMIT + 1):
            turn = ServedTurn()
            turn.feed(chunk(content=f"answer {i}"))
            await continuity.remember(a, turn)
        return await store.provenance_lookup(scope.name, [fingerprint_of("answer 0", [])])

    assert asyncio.run(run()), "the first turn was forgotten at the per-session limit"


def test_the_rewrite_benchmark_times_the_gateways_own_path() -> None:
    """``bench.rewrite`` (make bench) calls Continuity.outbound and checks, before timing,
    that the switched case rewrites and the others do not: run it, briefly."""
    from bench import rewrite

    assert set(rewrite.measure(7)) == {"unswitched", "switched", "tool-loop", "serialize"}
