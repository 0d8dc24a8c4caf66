"""A call costs what every attempt that reported usage cost, each at its own target's
price (SPEC §17): a stream that failed after its usage chunk and switched, a stream cut
after its usage and rescued elsewhere. Token budgets are charged the same tokens."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from routing.gateway.events import CallRecord
from routing.limits.gate import limits_use
from routing.limits.spec import GroupLimits, LimitSet, Price, cost_of, usage_tokens
from routing.simulator.script import DropAfter, Reply, UsageThenError
from tests.conftest import Harness, settle_calls

PRICE_A = Price(2.0, 10.0)
PRICE_B = Price(4.0, 20.0)
TWO_TARGETS = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
groups:
  - name: capped
    retry: {max_retries: 0}
    limits: {tokens_per_day: 100000}
    targets:
      - {provider: p1, model: a, price: {input: 2.0, output: 10.0}}
      - {provider: p1, model: b, price: {input: 4.0, output: 20.0}}
"""
SENT = "The answer is "
WHOLE = "The answer is forty-two, as everyone knows."


def stream(h: Harness) -> str:
    text = ""
    for chunk in h.client().chat.completions.create(
        model="capped",
        messages=[{"role": "user", "content": "What is the answer?"}],
        stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text


def tokens_today(h: Harness) -> float:
    """The group's tokens today, once every finished call's charge has landed (with Redis
    a call's settle runs as a task of the gateway's loop after the call ends)."""
    gate = h.runtime.limit_gate  # type: ignore[attr-defined]
    settle_calls(h.runtime)
    deadline = time.monotonic() + 10
    while gate._pending and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    use = async_to_sync(limits_use)(
        gate,
        group="capped",
        group_limits=GroupLimits(LimitSet(tokens_per_day=100000)),
    )
    return use["tokens_per_day"].used


def priced(usages: list[tuple[dict[str, Any] | None, Price]]) -> float:
    return sum(cost_of(u, p) or 0.0 for u, p in usages)


def test_an_attempt_that_failed_after_its_usage_is_paid_for(harness: Harness) -> None:
    harness.configure(TWO_TARGETS)
    harness.upstream.script("a", UsageThenError())
    harness.upstream.script("b", Reply("Forty-two."))
    assert stream(harness) == "Forty-two."
    [call] = harness.events(CallRecord, at_least=1)
    failed, answered = call.attempts
    assert (failed.target, failed.ok, answered.target) == ("p1/a", False, "p1/b")
    assert failed.usage and answered.usage  # the simulator reported both
    assert call.cost == pytest.approx(priced([(failed.usage, PRICE_A), (answered.usage, PRICE_B)]))
    assert call.cost > priced([(answered.usage, PRICE_B)])  # more than its answer alone
    assert tokens_today(harness) == usage_tokens(failed.usage) + usage_tokens(answered.usage)


def test_an_error_without_usage_adds_nothing(harness: Harness) -> None:
    harness.configure(TWO_TARGETS)
    harness.upstream.script("a", UsageThenError(status_in_stream=False))  # a plain HTTP 500
    harness.upstream.script("b", Reply("Forty-two."))
    stream(harness)
    [call] = harness.events(CallRecord, at_least=1)
    failed, answered = call.attempts
    assert failed.usage is None
    assert call.cost == pytest.approx(priced([(answered.usage, PRICE_B)]))
    assert tokens_today(harness) == usage_tokens(answered.usage)


def test_a_rescued_stream_pays_for_the_cut_attempt_and_its_continuation(
    harness: Harness,
) -> None:
    harness.configure(TWO_TARGETS.replace("    retry:", "    resume: restart\n    retry:"))
    harness.upstream.script("a", DropAfter(2, content=SENT, usage_first=True))
    harness.upstream.script("b", Reply(WHOLE, chunks=6))
    assert stream(harness) == WHOLE
    [call] = harness.events(CallRecord, at_least=1)
    cut, continuation = call.attempts
    assert (cut.target, continuation.target, continuation.continuation) == (
        "p1/a",
        "p1/b",
        True,
    )
    assert cut.usage and continuation.usage
    assert call.usage == continuation.usage  # the answer's usage: counted once
    assert call.cost == pytest.approx(priced([(cut.usage, PRICE_A), (continuation.usage, PRICE_B)]))
    assert tokens_today(harness) == usage_tokens(cut.usage) + usage_tokens(continuation.usage)
