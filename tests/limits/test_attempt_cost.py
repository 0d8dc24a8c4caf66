"""A call costs what every attempt that reported usage cost, each at its own target's
price (SPEC §17): a stream that failed after its usage chunk and switched, a stream cut
after its usage and rescued elsewhere. Token budgets are charged the same tokens."""

from __future__ import annotations

import re
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


def stream(h: Harness, client: Any = None) -> str:
    """A streamed call to ``capped`` (with ``client``: as that client's key), its text."""
    text = ""
    for chunk in (client or h.client()).chat.completions.create(
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


# the group without a budget of its own (the key has one), retrying once in place
KEYED = TWO_TARGETS.replace(
    "    retry: {max_retries: 0}\n    limits: {tokens_per_day: 100000}\n",
    "    retry: {max_retries: 1}\n",
)


def test_spend_counts_the_tokens_the_budget_was_charged(harness: Harness) -> None:
    """A call retried in place and then switched, each failed attempt billed: the key's
    budget use, its spend, the Spend API and page, and the call's ledger row all count
    the same attempts' tokens (and cost), over real sockets against the simulator."""
    import openai
    from django.contrib.auth.models import User
    from django.test import Client

    from routing.audit import writer
    from routing.services.api_keys import generate_key
    from tests.dashboard.conftest import PASSWORD

    writer.attach(harness.runtime.hub)  # type: ignore[attr-defined]
    harness.configure(KEYED)
    key, secret = generate_key(
        name="agent", limits={"tokens_per_day": 1_000_000, "cost_per_day": 100}
    )
    _, admin = generate_key(name="ops", kind="admin")
    harness.upstream.script("a", UsageThenError(), UsageThenError())
    harness.upstream.script("b", Reply("Forty-two."))
    agent = openai.OpenAI(base_url=harness.gateway.base_url, api_key=secret, max_retries=0)
    assert stream(harness, agent) == "Forty-two."
    [call] = harness.events(CallRecord, at_least=1)
    assert [(a.target, a.ok) for a in call.attempts] == [
        ("p1/a", False),  # retried in place
        ("p1/a", False),  # then switched
        ("p1/b", True),
    ]
    assert all(a.usage for a in call.attempts)  # each was billed
    billed = sum(usage_tokens(a.usage) for a in call.attempts)
    assert billed > usage_tokens(call.usage)  # more than the answer's own tokens
    tokens_today(harness)  # every charge landed
    writer.flush(10)

    http = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {admin}"}
    detail = http.get(f"/api/v1/keys/{key.pk}", **auth).json()
    assert detail["use"]["tokens_per_day"]["used"] == billed
    assert detail["spend"]["today"]["tokens"] == billed
    assert detail["use"]["cost_per_day"]["used"] == pytest.approx(call.cost)
    assert detail["spend"]["today"]["cost"] == pytest.approx(call.cost)
    [row] = [r for r in http.get("/api/v1/spend?by=key", **auth).json() if r["key"] == "agent"]
    assert (row["calls"], row["tokens"]) == (1, billed)
    assert row["cost"] == pytest.approx(call.cost)
    [listed] = http.get("/api/v1/calls", **auth).json()
    assert listed["usage"]["total_tokens"] == billed
    assert listed["usage"]["prompt_tokens"] == sum(a.usage["prompt_tokens"] for a in call.attempts)

    http.force_login(User.objects.create_user("operator", password=PASSWORD, is_staff=True))
    page = http.get("/spend/", {"by": "key"}).content.decode()
    agent_row = re.search(r'data-spend-row="agent">(.*?)</tr>', page, re.S)
    assert agent_row is not None
    assert re.findall(r'<td class="num">(\d+)</td>', agent_row.group(1)) == ["1", str(billed)]
    counted = re.search(r"<p [^>]*data-spend-counted>(.*?)</p>", page, re.S)
    assert counted is not None
    assert "Tokens and cost count the same attempts" in counted.group(1)
    assert "failed after reporting usage and was retried or switched" in counted.group(1)
    assert "as the token and cost budgets are charged" in counted.group(1)
