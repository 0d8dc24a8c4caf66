"""Limits through the real doors with the official SDKs (SPEC §17)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from routing.gateway.events import CallOutcome, CallRecord
from tests.conftest import Harness

# 2026-12-04 17:30:30 UTC: half a minute before the minute window resets.
NOW = 1_796_405_430.0

GROUP = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
groups:
  - name: capped
    limits: {LIMITS}
    targets:
      - {provider: p1, model: a, price: {input: 2.0, output: 10.0, cached_input: 0.5}}
"""


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(harness: Harness) -> Iterator[Clock]:
    clock = Clock(NOW)
    previous = harness.runtime.clock  # type: ignore[attr-defined]
    harness.runtime.clock = clock  # type: ignore[attr-defined]
    yield clock
    harness.runtime.clock = previous  # type: ignore[attr-defined]


def configure(harness: Harness, limits: str, extra: str = "") -> None:
    harness.configure(GROUP.replace("{LIMITS}", limits) + extra)


def ask(client: Any) -> Any:
    return client.chat.completions.create(
        model="capped", messages=[{"role": "user", "content": "hi"}]
    )


def records(harness: Harness, outcome: CallOutcome | None = None) -> list[CallRecord]:
    found = harness.events(CallRecord)
    return [r for r in found if outcome is None or r.outcome == outcome]


def test_rpm_lets_exactly_the_limit_through_then_a_429_naming_it(
    harness: Harness, clock: Clock
) -> None:
    configure(harness, "{rpm: 3}")
    client = harness.client()
    for _ in range(3):
        ask(client)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)
    error = caught.value
    assert error.status_code == 429
    assert error.code == "rpm_limit"
    assert error.type == "rate_limit_error"
    assert error.response.headers["retry-after"] == "30"
    assert "rpm of group 'capped'" in error.message
    assert "3 per minute" in error.message and "2026-12-04T17:31:00Z" in error.message
    assert harness.upstream.count() == 3  # refused before any upstream
    refused = records(harness, CallOutcome.REFUSED)
    assert [(r.error_code, r.http_status, r.attempts) for r in refused] == [("rpm_limit", 429, [])]
    assert error.message.endswith(refused[0].reason)
    clock.now += 30  # the next minute: the window frees
    ask(client)
    assert harness.upstream.count() == 4


def test_the_openai_sdk_retries_after_retry_after_on_rpm(harness: Harness, clock: Clock) -> None:
    configure(harness, "{rpm: 1}")
    clock.now = NOW + 29.5  # half a second before the window resets: Retry-After 1
    ask(harness.client())
    with pytest.raises(openai.RateLimitError) as caught:
        ask(harness.client().with_options(max_retries=1))
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.response.headers["x-should-retry"] == "true"
    # The SDK honoured the 429 and Retry-After: it asked once more before giving up.
    assert len(records(harness, CallOutcome.REFUSED)) == 2


def test_a_budget_is_not_retried_by_the_sdk_and_cost_is_charged(
    harness: Harness, clock: Clock
) -> None:
    configure(harness, "{cost_per_day: 0.000001}")
    answer = ask(harness.client())
    assert answer.usage is not None
    with pytest.raises(openai.RateLimitError) as caught:
        ask(harness.client().with_options(max_retries=2))
    assert caught.value.code == "budget_exceeded"
    assert caught.value.type == "budget_exceeded"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.response.headers["retry-after"] == str(
        int(NOW // 86400 + 1) * 86400 - int(NOW)
    )
    assert len(records(harness, CallOutcome.REFUSED)) == 1  # no retry: waiting cannot help
    served = records(harness, CallOutcome.OK)[0]
    usage = answer.usage
    expected = (usage.prompt_tokens * 2.0 + usage.completion_tokens * 10.0) / 1e6
    assert served.cost == pytest.approx(expected)


def test_no_price_means_no_cost(harness: Harness, clock: Clock) -> None:
    harness.configure(
        GROUP.replace("{LIMITS}", "{}").replace(
            ", price: {input: 2.0, output: 10.0, cached_input: 0.5}", ""
        )
    )
    ask(harness.client())
    assert records(harness, CallOutcome.OK)[0].cost is None


def test_the_messages_door_refuses_in_anthropic_shape(harness: Harness, clock: Clock) -> None:
    configure(harness, "{rpm: 0}")
    client = anthropic.Anthropic(base_url=harness.gateway.url, api_key=harness.key, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(
            model="capped", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "rate_limit_error"
    assert "rpm" in body["error"]["message"]
    assert caught.value.response.headers["retry-after"] == "30"
    assert harness.upstream.count() == 0


def test_the_responses_door_refuses_with_the_code(harness: Harness, clock: Clock) -> None:
    configure(harness, "{rpm: 0}")
    with pytest.raises(openai.RateLimitError) as caught:
        harness.client().responses.create(model="capped", input="hi")
    assert caught.value.code == "rpm_limit"


def test_session_caps_and_the_loop_guard(harness: Harness, clock: Clock) -> None:
    harness.configure(
        GROUP.replace(
            "    limits: {LIMITS}\n", "    session_limits: {calls: 5}\n    loop_guard: 2\n"
        )
    )
    client = harness.client()

    def same(session: str) -> Any:
        return client.chat.completions.create(
            model="capped",
            messages=[{"role": "user", "content": "again"}],
            extra_headers={"x-session-id": session},
        )

    same("s1")
    same("s1")
    with pytest.raises(openai.RateLimitError) as caught:
        same("s1")
    assert caught.value.code == "loop_detected"
    assert "retry-after" not in caught.value.response.headers
    same("s2")  # another session is not stopped
    for text in ("a", "b", "c"):  # a different body breaks the streak; calls still count
        client.chat.completions.create(
            model="capped",
            messages=[{"role": "user", "content": text}],
            extra_headers={"x-session-id": "s1"},
        )
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="capped",
            messages=[{"role": "user", "content": "d"}],
            extra_headers={"x-session-id": "s1"},
        )
    assert caught.value.code == "session_budget_exceeded"


def test_a_group_without_limits_is_untouched(harness: Harness, clock: Clock) -> None:
    harness.configure(GROUP.replace("    limits: {LIMITS}\n", ""))
    for _ in range(5):
        ask(harness.client())
    assert harness.upstream.count() == 5
    assert records(harness, CallOutcome.REFUSED) == []


def test_metrics_count_refusals_tokens_and_cost(harness: Harness, clock: Clock) -> None:
    import httpx

    from routing.services.api_keys import generate_key

    _, admin = generate_key(name="ops", kind="admin")
    configure(harness, "{rpm: 1}")
    ask(harness.client())
    with pytest.raises(openai.RateLimitError):
        ask(harness.client())
    records(harness)
    text = httpx.get(
        harness.gateway.url + "/metrics", headers={"authorization": f"Bearer {admin}"}
    ).text
    assert 'switchyard_refusals_total{code="rpm_limit",group="capped"}' in text
    assert 'switchyard_calls_total{group="capped",outcome="refused"}' in text
    assert 'switchyard_output_tokens_total{group="capped",target="p1/a"}' in text
    assert 'switchyard_input_tokens_total{group="capped",target="p1/a"}' in text
    assert 'switchyard_cost_total{group="capped",target="p1/a"}' in text


def test_the_anthropic_sdk_retries_a_rate_limit_after_retry_after(
    harness: Harness, clock: Clock
) -> None:
    configure(harness, "{rpm: 0}")
    clock.now = NOW + 29.5  # Retry-After: 1
    client = anthropic.Anthropic(base_url=harness.gateway.url, api_key=harness.key, max_retries=1)
    with pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(
            model="capped", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.response.headers["retry-after"] == "1"
    assert len(records(harness, CallOutcome.REFUSED)) == 2  # asked again once, then gave up


def test_concurrency_counts_a_stream_until_its_end(harness: Harness, clock: Clock) -> None:
    from routing.simulator.script import Reply

    configure(harness, "{concurrency: 1}")
    harness.upstream.script("a", Reply(chunks=3, chunk_delay_s=1.0))
    client = harness.client()
    stream = client.chat.completions.create(
        model="capped",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    next(iter(stream))  # the stream is open: its call is in flight
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)
    assert caught.value.code == "concurrency_limit"
    assert caught.value.response.headers["retry-after"] == "1"
    for _ in stream:
        pass
    assert harness.events(CallRecord, at_least=2)  # the stream's record: its slot is free
    ask(client)
    ok = records(harness, CallOutcome.OK)
    assert len(ok) == 2 and ok[0].stream and ok[0].cost is not None  # a stream is priced too


def test_retries_and_switches_inside_a_call_take_no_new_request_slot(
    harness: Harness, clock: Clock
) -> None:
    """A call is admitted once (issue 41): its in-place retries and its switch to another
    target are not new requests, so they count neither against ``rpm`` nor against
    ``concurrency``. Three 503s on a, then b answers: one call, one slot of each."""
    from routing.simulator.script import Fail

    harness.configure(
        GROUP.replace("{LIMITS}", "{rpm: 2, concurrency: 1}").replace(
            "      - {provider: p1, model: a, price: {input: 2.0, output: 10.0, cached_input: 0.5}}",
            "      - {provider: p1, model: a}\n      - {provider: p1, model: b}",
        )
    )
    harness.upstream.script("a", Fail(503), Fail(503), Fail(503))
    client = harness.client().with_options(max_retries=0)
    answer = ask(client)  # concurrency 1 held by this call through every attempt
    assert answer.choices[0].message.content == "Hello from b."  # b answered (the model
    # the answer names is the one asked for)
    assert (harness.upstream.count("a"), harness.upstream.count("b")) == (3, 1)
    ask(client)  # rpm 2: the first call took one slot, not four
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)
    assert caught.value.code == "rpm_limit"
    served = records(harness, CallOutcome.OK)
    assert [len(r.attempts) for r in served] == [4, 1]
