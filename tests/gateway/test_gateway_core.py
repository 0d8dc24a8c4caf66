"""The gateway core end to end: the official openai SDK → Switchyard (real sockets) →
a scripted fake upstream (real sockets). Each test maps to a line of the core issue's
"done when" list."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import httpx
import openai
import pytest

from routing.engine.health import EventKind, HealthEvent
from routing.gateway.events import CallRecord, FallbackEvent
from routing.simulator.script import (
    ContentFilter,
    ContextLength,
    Delay,
    DropAfter,
    Empty,
    Fail,
    Malformed,
    NoDone,
    Reply,
    Reset,
    Silent,
    StallAfter,
    UsageThenError,
)
from tests.conftest import TWO_ROUTES, Harness

MESSAGES = [{"role": "user", "content": "hi"}]

FAST_TIMEOUTS = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1
    timeouts: {connect_s: 2, first_token_s: 0.6, idle_s: 0.6, total_s: 10}
  - name: p2
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p2
groups:
  - name: auto
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
  - name: safe
    commit: complete
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(TWO_ROUTES)
    harness.runtime.rand = lambda: 0.5  # no jitter: delays are exactly the policy's
    return harness


def stream_text(stream) -> tuple[str, list]:  # type: ignore[no-untyped-def]
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks


def test_in_place_retry_uses_the_same_target_three_times(h: Harness) -> None:
    h.upstream.script("a", Fail(503), Fail(503), Reply("third time lucky"))
    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    reply = raw.parse()
    assert reply.choices[0].message.content == "third time lucky"
    assert h.upstream.count("a") == 3 and h.upstream.count("b") == 0
    assert raw.headers["x-switchyard-target"] == "p1/a"
    assert raw.headers["x-switchyard-attempts"] == "3"
    assert raw.headers["x-switchyard-request-id"]
    assert raw.headers["content-length"] == str(len(raw.http_response.content))
    assert raw.headers["x-switchyard-trail"] == "p1/a:SERVER:503,p1/a:SERVER:503,p1/a:ok"
    # initial_delay_ms 500 doubling, jitter neutralised by rand=0.5
    assert h.sleeps.delays == [0.5, 1.0]


def test_an_overloaded_first_target_switches_within_the_budget(h: Harness) -> None:
    # SPEC §16: a 529 on the first of two targets reaches the second within ~2.5 s of
    # waits (switch_after_ms 2000), not after the whole 15.5 s in-place schedule.
    h.upstream.script("a", then=Fail(529, "overloaded"))
    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.headers["x-switchyard-target"] == "p2/b"
    assert h.sleeps.delays == [0.5, 1.0]  # a third wait (2 s) would pass the budget
    assert sum(h.sleeps.delays) <= 2.5
    assert h.upstream.count("a") == 3 and h.upstream.count("b") == 1
    [fallback] = h.events(FallbackEvent)
    assert (fallback.from_target, fallback.to_target, fallback.reason) == (
        "p1/a",
        "p2/b",
        "retry-exhausted",
    )


def test_the_switch_budget_is_a_policy_field(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    retry: {switch_after_ms: 0}\n")
    )
    harness.upstream.script("a", then=Fail(503))
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    assert harness.sleeps.delays == []  # no wait fits a budget of 0: switch at once


def test_backoff_follows_the_policy_with_jitter_bounds(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "  - name: auto\n",
            "  - name: auto\n    retry: {max_retries: 4, initial_delay_ms: 100, max_delay_ms: 300, jitter_ratio: 0.2}\n",
        )
    )
    harness.runtime.rand = lambda: 1.0 - 1e-9  # the top of the jitter band
    harness.upstream.script("a", Fail(500), Fail(500), Fail(500), Fail(500), Reply())
    harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    # 100, 200, then capped at 300 (jitter never exceeds the cap)
    assert harness.sleeps.delays == pytest.approx([0.12, 0.24, 0.3, 0.3], abs=1e-6)


def test_non_retryable_switch_code_moves_on_after_one_attempt(h: Harness) -> None:
    h.upstream.script("a", Fail(401, "bad key"))
    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert raw.headers["x-switchyard-target"] == "p2/b" and raw.parse().model == "auto"
    assert h.upstream.count("a") == 1 and h.upstream.count("b") == 1
    assert raw.headers["x-switchyard-target"] == "p2/b"
    assert h.sleeps.delays == []
    [fallback] = h.events(FallbackEvent)
    assert (fallback.from_target, fallback.to_target, fallback.code) == ("p1/a", "p2/b", "AUTH")


def test_retry_after_beyond_max_delay_switches_at_once(h: Harness) -> None:
    h.upstream.script("a", Fail(429, "slow down", headers={"Retry-After": "30"}))
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    assert h.upstream.count("a") == 1
    assert h.sleeps.delays == []


def test_retry_after_within_max_delay_replaces_the_backoff(h: Harness) -> None:
    # 1 s, not the 0.5 s backoff; within switch_after_ms (2 s) with the attempt's own time
    # (a wait of the whole 2 s plus the attempt would pass it: b is eligible, so a switch)
    h.upstream.script("a", Fail(429, "slow down", headers={"Retry-After": "1"}), Reply())
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from a."
    assert h.sleeps.delays == [1.0]


def test_stream_cut_after_commit_surfaces_an_error_and_never_a_second_answer(h: Harness) -> None:
    h.upstream.script("a", DropAfter(2, content="one two "))
    stream = h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "".join(received) == "one two "
    assert h.upstream.count("b") == 0
    assert h.upstream.count("a") == 1


def test_usage_chunk_then_error_is_invisible_and_next_target_answers(h: Harness) -> None:
    h.upstream.script("a", then=UsageThenError())
    stream = h.client().chat.completions.create(
        model="auto", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    text, chunks = stream_text(stream)
    assert text == "Hello from b."
    assert {c.model for c in chunks} == {"auto"}  # the name asked for (SPEC §3, step 11)
    assert sum(1 for c in chunks if c.usage is not None) == 1
    # first try + 2 in-place retries, all invisible: a third wait would pass the 2 s
    # switch_after_ms budget while b is eligible (SPEC §16)
    assert h.upstream.count("a") == 3


@pytest.mark.parametrize("behaviour", [DropAfter(40), StallAfter(40)], ids=["cut", "stall"])
def test_commit_complete_fails_over_even_late_in_the_stream(
    harness: Harness, behaviour: object
) -> None:
    harness.configure(FAST_TIMEOUTS)
    harness.upstream.script("a", then=behaviour)
    harness.upstream.script("b", Reply("the whole answer", chunks=5))
    stream = harness.client().chat.completions.create(model="safe", messages=MESSAGES, stream=True)
    text, chunks = stream_text(stream)
    assert text == "the whole answer" and harness.upstream.count("b") == 1
    assert {c.model for c in chunks} == {"safe"}


@pytest.mark.parametrize(
    ("behaviour", "code", "tries"),
    [
        (Empty(), "EMPTY_RESPONSE", 3),  # 2 retries: switch_after_ms while b is eligible
        (Malformed("json"), "TRANSPORT", 3),
        (Reset(), "TRANSPORT", 3),
        (Silent(), "TIMEOUT", 1),
        (StallAfter(0), "TIMEOUT", 1),
    ],
    ids=["empty", "unparseable", "reset", "silent", "stalled-before-commit"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_failures_before_commit_fail_over(
    harness: Harness, behaviour: object, code: str, tries: int, stream: bool
) -> None:
    harness.configure(
        FAST_TIMEOUTS.replace("total_s: 10", "total_s: 1.5" if not stream else "total_s: 10")
    )
    harness.upstream.script("a", then=behaviour)
    client = harness.client()
    if stream:
        text, _ = stream_text(
            client.chat.completions.create(model="auto", messages=MESSAGES, stream=True)
        )
    else:
        text = (
            client.chat.completions.create(model="auto", messages=MESSAGES)
            .choices[0]
            .message.content
        )
    assert text == "Hello from b."
    assert harness.upstream.count("a") == tries
    [call] = harness.events(CallRecord, at_least=1)
    assert call.attempts[0].code == code
    assert call.served_by == "p2/b"


def test_context_window_error_is_never_resent_to_the_same_target(h: Harness) -> None:
    h.upstream.script("a", then=ContextLength())
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    assert h.upstream.count("a") == 1


def test_context_window_skips_targets_that_are_not_larger(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "{provider: p1, model: a}", "{provider: p1, model: a, context_window: 8192}"
        ).replace("{provider: p2, model: b}", "{provider: p2, model: b, context_window: 8192}")
    )
    harness.upstream.script("a", then=ContextLength())
    with pytest.raises(openai.APIStatusError) as caught:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert harness.upstream.count("b") == 0
    assert "context window" in caught.value.message


def test_content_filter_refusal_is_returned_after_one_attempt(h: Harness) -> None:
    h.upstream.script("a", ContentFilter())
    with pytest.raises(openai.BadRequestError) as caught:
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert caught.value.status_code == 400
    assert caught.value.code == "CONTENT_FILTER"
    assert h.upstream.count("a") == 1 and h.upstream.count("b") == 0


def test_a_malformed_stream_line_is_skipped_and_the_rest_arrives(h: Harness) -> None:
    bad = Malformed("sse-line")
    h.upstream.script("a", bad)
    text, chunks = stream_text(
        h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    )
    assert text == bad.expected_content()
    assert h.upstream.count("b") == 0


def test_stream_without_done_ends_promptly_with_its_usage(h: Harness) -> None:
    h.upstream.script("a", NoDone(chunks=3))
    started = time.monotonic()
    text, chunks = stream_text(
        h.client().chat.completions.create(
            model="auto", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    # Ended by the upstream's close, not by the 60 s idle timeout (loose: a busy machine).
    assert time.monotonic() - started < 30
    assert text == "Hello from a."
    assert [c.usage.total_tokens for c in chunks if c.usage] and chunks[-1].usage is not None
    assert all(c.model == "auto" for c in chunks)


def test_all_targets_failing_returns_routes_exhausted_naming_each(h: Harness) -> None:
    h.upstream.script("a", then=Fail(503, "a is down"))
    h.upstream.script("b", then=Fail(500, "b is down"))
    with pytest.raises(openai.APIStatusError) as caught:
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    error = caught.value
    assert error.status_code == 502
    assert error.code == "ROUTES_EXHAUSTED"
    assert "p1/a → SERVER (HTTP 503): a is down" in error.message
    assert "p2/b → SERVER (HTTP 500): b is down" in error.message
    # a switches once its waits would pass switch_after_ms; b, the last, gets every retry
    assert "3 attempts" in error.message and "6 attempts" in error.message
    assert h.upstream.count("a") == 3 and h.upstream.count("b") == 6


def test_an_exhausted_call_logs_exactly_one_error_line(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The gateway's own ``exhausted call=…`` line says it all; Django's ``django.request``
    logged the same 502 a second time ("Bad Gateway: /v1/chat/completions", issue 41)."""
    caplog.set_level(logging.INFO)
    h.upstream.script("a", then=Fail(503, "a is down"))
    h.upstream.script("b", then=Fail(500, "b is down"))
    with pytest.raises(openai.APIStatusError):
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage().split(" ", 1)[0] for r in errors] == ["exhausted"], [
        (r.name, r.getMessage()) for r in errors
    ]


def test_every_failed_attempt_carries_its_cooling_and_each_transition_its_call(
    h: Harness,
) -> None:
    """Issue 41: the cooling the last target's failure earned was tied to no call (only a
    switch's fallback event carried it). Now each target's last attempt, its exhaustion
    line and each health transition say what it earned, and which call earned it."""
    slow_down = Fail(429, "slow down", headers={"Retry-After": "30"})
    h.upstream.script("a", then=slow_down)
    h.upstream.script("b", then=slow_down)
    with pytest.raises(openai.APIStatusError) as caught:
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    [call] = h.events(CallRecord, at_least=1)
    assert [(a.target, a.cooldown_s) for a in call.attempts] == [
        ("p1/a", pytest.approx(30, abs=1)),
        ("p2/b", pytest.approx(30, abs=1)),
    ]
    lines = caught.value.message.splitlines()[1:]
    assert all(line.endswith("; cooling 30 s)") for line in lines), lines
    cooling = [e for e in h.events(HealthEvent) if e.kind is EventKind.COOLING]
    assert [(e.target, e.call_id) for e in cooling] == [
        ("p1/a", call.call_id),
        ("p2/b", call.call_id),
    ]


def test_only_real_switches_are_fallbacks_and_exhaustion_lines_give_both_times(
    h: Harness,
) -> None:
    h.upstream.script("a", then=Fail(503, "a is down"))
    h.upstream.script("b", then=Fail(500, "b is down"))
    with pytest.raises(openai.APIStatusError) as caught:
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    # a → b is a switch; b failing last is on the call's record, not a fallback
    [fallback] = h.events(FallbackEvent)
    assert (fallback.from_target, fallback.to_target, fallback.attempts) == ("p1/a", "p2/b", 3)
    [call] = h.events(CallRecord, at_least=1)
    assert [a.switched_to for a in call.attempts if a.switched] == ["p2/b"]
    assert call.attempts[-1].reason == "retry-exhausted" and not call.attempts[-1].switched
    # the last attempt's time, then the total on that target
    lines = caught.value.message.splitlines()[1:]
    assert re.fullmatch(
        r"p1/a → SERVER \(HTTP 503\): a is down \(\d+ ms; 3 attempts in \d+\.\d s"
        r"(; cooling \d+ s)?\)",
        lines[0],
    ), lines[0]
    assert re.fullmatch(
        r"p2/b → SERVER \(HTTP 500\): b is down \(\d+ ms; 6 attempts in \d+\.\d s"
        r"(; cooling \d+ s)?\)",
        lines[1],
    ), lines[1]


def test_one_warning_per_retry_and_per_switch_and_none_for_a_success(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []

    h.upstream.script("a", Fail(503, "busy key upstream-key-p1"), then=Fail(401, "bad key"))
    reply = h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    lines = [r.getMessage() for r in caplog.records if r.name == "switchyard.events"]
    retries = [line for line in lines if line.startswith("retry ")]
    switches = [line for line in lines if line.startswith("switch ")]
    [retry] = retries
    # b is eligible: after this 0.5 s wait, switch_after_ms (2 s) allows one more (1 s),
    # not the 4 max_retries would (issue 41)
    assert "target=p1/a try=1 code=SERVER status=503 in 0.500s (1 retry left)" in retry
    assert retry.endswith(": busy key [redacted]")  # scrubbed upstream text
    [switch] = switches
    assert "from=p1/a to=p2/b reason=not-retryable after 2 attempts code=AUTH status=401" in switch
    assert switch.endswith(": bad key")
    assert all(
        r.levelno == logging.WARNING for r in caplog.records if r.name == "switchyard.events"
    )


def test_cancelling_a_stream_closes_the_upstream_connection(h: Harness) -> None:
    h.upstream.script("a", StallAfter(2))
    with (
        httpx.Client(timeout=5) as client,
        client.stream(
            "POST",
            h.gateway.base_url + "/chat/completions",
            headers={"authorization": f"Bearer {h.key}"},
            json={"model": "auto", "messages": MESSAGES, "stream": True},
        ) as response,
    ):
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    assert h.upstream.wait_disconnected(1.0)


async def test_async_sdk_streams_and_names_the_model_asked_for(h: Harness) -> None:
    async with h.async_client() as client:
        stream = await client.chat.completions.create(model="auto", messages=MESSAGES, stream=True)
        chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello from a."
    assert {c.model for c in chunks} == {"auto"}  # the concrete one is on the header


def test_direct_provider_model_address_bypasses_groups(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace("api_key: upstream-key-p2", "api_key: k2\n    models: [b]")
    )
    reply = harness.client().chat.completions.create(model="p2/b", messages=MESSAGES)
    assert reply.model == "p2/b" and reply.choices[0].message.content == "Hello from b."


def test_models_lists_groups(h: Harness) -> None:
    models = h.client().models.list()
    assert [m.id for m in models.data] == ["auto"]


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({}, {"model": "auto", "messages": MESSAGES}, 401, "missing_api_key"),
        (
            {"authorization": "Bearer sk-nope"},
            {"model": "auto", "messages": MESSAGES},
            401,
            "invalid_api_key",
        ),
        (None, b"{not json", 400, "invalid_json"),
        (None, [1, 2], 400, "invalid_request"),
        (None, {"messages": MESSAGES}, 400, "invalid_request"),
        (None, {"model": 7, "messages": MESSAGES}, 400, "invalid_request"),
        (None, {"model": "auto", "messages": []}, 400, "invalid_request"),
        (None, {"model": "auto", "messages": MESSAGES, "stream": "yes"}, 400, "invalid_request"),
        (None, {"model": "nope", "messages": MESSAGES}, 404, "model_not_found"),
        (None, b"{" + b" " * (9 * 1024 * 1024) + b"}", 413, "request_too_large"),
    ],
    ids=[
        "no-key",
        "bad-key",
        "bad-json",
        "not-object",
        "no-model",
        "model-type",
        "no-messages",
        "stream-type",
        "unknown-model",
        "too-large",
    ],
)
def test_bad_input_gets_an_openai_shaped_4xx(h: Harness, headers, body, status, code) -> None:  # type: ignore[no-untyped-def]
    sent_headers = (
        {"authorization": f"Bearer {h.key}", "content-type": "application/json"}
        if headers is None
        else headers
    )
    content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
    response = httpx.post(
        h.gateway.base_url + "/chat/completions", headers=sent_headers, content=content, timeout=10
    )
    assert response.status_code == status
    assert response.headers["content-length"] == str(len(response.content))
    error = response.json()["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "code", "param"}
    assert h.upstream.count() == 0


def test_upstream_error_text_is_scrubbed_of_the_credential(h: Harness) -> None:
    h.upstream.script("a", then=Fail(400, "Incorrect API key provided: upstream-key-p1"))
    with pytest.raises(openai.BadRequestError) as caught:
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert "upstream-key-p1" not in caught.value.message
    assert "[redacted]" in caught.value.message


def test_the_call_deadline_bounds_retries_and_switches_together(harness: Harness) -> None:
    harness.configure(TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    deadline_s: 1\n"))
    harness.upstream.script("a", then=Silent())
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    # The 1 s deadline, not the 60 s first-token timeout, ended it (loose: a busy machine).
    assert time.monotonic() - started < 30
    assert caught.value.status_code == 502
    assert "p1/a → TIMEOUT" in caught.value.message
    assert "p2/b → not tried" in caught.value.message
    assert harness.upstream.count("b") == 0


def test_the_call_deadline_is_kept_on_the_runtimes_monotonic_clock(harness: Harness) -> None:
    """A call's deadline arithmetic reads ``runtime.monotonic``: a backoff the injected
    clock says took a minute outlives a 5 s deadline, with no real wait, and the call
    stops there instead of trying again or switching."""
    harness.configure(TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    deadline_s: 5\n"))
    harness.runtime.rand = lambda: 0.5  # type: ignore[attr-defined]
    harness.upstream.script("a", Fail(503), Reply("too late"))
    skew = [0.0]

    async def a_minute_passes(delay: float) -> None:
        harness.sleeps.delays.append(delay)
        skew[0] += 60.0

    runtime: Any = harness.runtime
    runtime.monotonic, runtime.sleep = lambda: time.monotonic() + skew[0], a_minute_passes
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    finally:
        runtime.monotonic, runtime.sleep = time.monotonic, harness.sleeps
    assert caught.value.status_code == 502
    assert "p1/a → TIMEOUT: call deadline reached" in caught.value.message
    assert "p2/b → not tried" in caught.value.message
    assert len(harness.sleeps.delays) == 1
    assert harness.upstream.count("a") == 1 and harness.upstream.count("b") == 0


def test_overhead_header_excludes_upstream_time_and_backoff(h: Harness) -> None:

    h.client().chat.completions.create(model="auto", messages=MESSAGES)  # compiles the table
    h.upstream.script("a", Fail(503), Delay(0.4, Reply()))
    started = time.monotonic()
    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    elapsed_ms = (time.monotonic() - started) * 1000
    overhead_ms = float(raw.headers["x-switchyard-overhead-ms"])
    assert 0 < overhead_ms < 200  # the 400 ms upstream wait is not ours
    assert elapsed_ms >= 400


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/chat/completions", 405),
        ("DELETE", "/chat/completions", 405),
        ("POST", "/completions", 404),
        ("GET", "/nope/deeper", 404),
    ],
)
def test_wrong_method_or_unknown_v1_path_is_openai_shaped(
    h: Harness, method: str, path: str, status: int
) -> None:
    response = httpx.request(
        method, h.gateway.base_url + path, headers={"authorization": f"Bearer {h.key}"}, timeout=10
    )
    assert response.status_code == status
    assert set(response.json()["error"]) == {"message", "type", "code", "param"}
