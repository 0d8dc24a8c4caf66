"""The upstream simulator, driven over real loopback sockets with httpx and the openai SDK.

No Django here: the simulator must work with Django unconfigured
(``pytest tests/simulator/test_simulator.py -p no:django``). The two command-line entry points are
exercised as subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from openai.types.chat import ChatCompletionMessageParam

from routing.simulator import (
    Behaviour,
    ContentFilter,
    ContextLength,
    Delay,
    DropAfter,
    Empty,
    EndBeforeFinish,
    Fail,
    FakeUpstream,
    Flaky,
    Malformed,
    NoDone,
    Reply,
    Reset,
    Silent,
    StallAfter,
    UsageThenError,
    behaviour_from_dict,
    to_dict,
)
from routing.simulator.payloads import split_pieces
from routing.simulator.presets import (
    DEMO_API_KEY,
    DEMO_AWS_KEY_ID,
    DEMO_AWS_SECRET,
    DEMO_BEDROCK_MODEL,
    DEMO_CLAUDE,
    DEMO_CONFIG,
    DEMO_MODELS,
    DEMO_VERTEX_MODEL,
)

ROOT = Path(__file__).resolve().parents[2]
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "say hello"}]


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def client(upstream: FakeUpstream) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=upstream.base_url, timeout=5) as c:
        yield c


def sdk(upstream: FakeUpstream, api_key: str = "any", timeout: float = 5) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=upstream.base_url, api_key=api_key, max_retries=0, timeout=timeout
    )


def body(model: str = "m", *, stream: bool = False, usage: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "messages": MESSAGES, "stream": stream}
    if usage:
        out["stream_options"] = {"include_usage": True}
    return out


def sse(client: httpx.Client, payload: dict[str, Any], **kw: Any) -> list[str]:
    """The data lines of a stream, in order (raises what the transport raises)."""
    with client.stream("POST", "/chat/completions", json=payload, **kw) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [line.removeprefix("data: ") for line in response.iter_lines() if line]


def partial_sse(
    client: httpx.Client,
    payload: dict[str, Any],
    **kw: Any,
) -> tuple[list[str], Exception | None]:
    """Data lines received before the stream ended or failed, and the failure."""
    lines: list[str] = []
    try:
        with client.stream("POST", "/chat/completions", json=payload, **kw) as response:
            for line in response.iter_lines():
                if line:
                    lines.append(line.removeprefix("data: "))
    except httpx.HTTPError as exc:
        return lines, exc
    return lines, None


def content_of(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["choices"][0]["delta"]["content"]
        for e in events
        if e.get("choices") and e["choices"][0]["delta"].get("content")
    ]


# -- good answers ------------------------------------------------------------------------
def test_reply_non_stream_is_one_completion_with_usage(client: httpx.Client) -> None:
    response = client.post("/chat/completions", json=body("alpha"))
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["model"] == "alpha" and data["id"].startswith("chatcmpl-")
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "Hello from alpha."}
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


def test_reply_stream_shape_with_usage(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", Reply(content="one two three four", chunks=4))
    lines = sse(client, body(stream=True, usage=True))
    assert lines[-1] == "[DONE]"
    events = [json.loads(line) for line in lines[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content_of(events) == ["one ", "two ", "three ", "four"]
    assert events[5]["choices"][0]["finish_reason"] == "stop"
    assert events[6]["choices"] == [] and events[6]["usage"]["completion_tokens"] == 4
    assert len(events) == 7
    assert {e["id"] for e in events} == {events[0]["id"]}
    assert {e["model"] for e in events} == {"m"}


def test_stream_without_include_usage_has_no_usage(client: httpx.Client) -> None:
    lines = sse(client, body(stream=True))
    events = [json.loads(line) for line in lines[:-1]]
    assert all("usage" not in e for e in events)
    assert len(events) == 1 + 3 + 1


def test_reply_with_openai_sdk_stream_and_reasoning(upstream: FakeUpstream) -> None:
    upstream.script("m", Reply(reasoning="thinking", tool_call=True, finish_reason="tool_calls"))
    chunks = list(
        sdk(upstream).chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from m."
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert any(getattr(d, "reasoning_content", None) == "thinking" for d in deltas)
    calls = [d.tool_calls[0] for d in deltas if d.tool_calls]
    assert calls[0].function is not None and calls[0].function.name == "get_weather"
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_reply_with_openai_sdk_non_stream(upstream: FakeUpstream) -> None:
    upstream.script("m", Reply(content="plain {model}", usage=False))
    completion = sdk(upstream).chat.completions.create(model="m", messages=MESSAGES)
    assert completion.choices[0].message.content == "plain m"
    assert completion.usage is None


def test_chunk_delay_spaces_the_content_chunks(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", Reply(content="a b c d", chunks=4, chunk_delay_s=0.02))
    arrivals = []
    sent = time.monotonic()
    with client.stream("POST", "/chat/completions", json=body(stream=True)) as response:
        for line in response.iter_lines():
            if '"content":"' in line and '"role"' not in line:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 4
    # Three gaps of 20 ms between the chunks, counted from the request: the first chunk's
    # arrival can be late on a busy machine and make the gaps after it look shorter, but
    # the last chunk cannot leave before the delays have passed.
    assert arrivals[-1] - sent >= 0.06


def test_empty_answers_without_content(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", Empty(), Empty())
    lines = sse(client, body(stream=True))
    events = [json.loads(line) for line in lines[:-1]]
    assert lines[-1] == "[DONE]" and len(events) == 2
    assert content_of(events) == [] and events[1]["choices"][0]["finish_reason"] == "stop"
    data = client.post("/chat/completions", json=body()).json()
    assert data["choices"][0]["message"]["content"] == ""


def test_no_done_ends_cleanly_after_usage(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", NoDone(chunks=2))
    lines, error = partial_sse(client, body(stream=True, usage=True))
    assert error is None
    assert "[DONE]" not in lines
    events = [json.loads(line) for line in lines]
    assert content_of(events) == ["Hello from ", "m."]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] > 0


# -- errors --------------------------------------------------------------------------------
def test_fail_passes_status_headers_and_error_shape(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script(
        "m",
        Fail(
            429,
            "slow down, {model}",
            code="rate_limit_exceeded",
            headers={"Retry-After": "7", "retry-after-ms": "7000"},
        ),
    )
    response = client.post("/chat/completions", json=body())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7" and response.headers["retry-after-ms"] == "7000"
    assert response.json() == {
        "error": {
            "message": "slow down, m",
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
            "param": None,
        }
    }


def test_fail_with_raw_body_and_sdk_error(upstream: FakeUpstream) -> None:
    upstream.script(
        "m",
        Fail(503, body="<html>overloaded</html>"),
        Fail(429, "later", headers={"Retry-After": "3"}),
    )
    with pytest.raises(openai.InternalServerError) as server_error:
        sdk(upstream).chat.completions.create(model="m", messages=MESSAGES)
    assert server_error.value.response.text == "<html>overloaded</html>"
    with pytest.raises(openai.RateLimitError) as rate_limit:
        sdk(upstream).chat.completions.create(model="m", messages=MESSAGES)
    assert rate_limit.value.response.headers["retry-after"] == "3"


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        (ContextLength(), "context_length_exceeded"),
        (ContentFilter(), "content_filter"),
    ],
)
def test_refusals_are_400_with_their_code(
    upstream: FakeUpstream, client: httpx.Client, behaviour: Behaviour, code: str
) -> None:
    upstream.script("m", behaviour)
    response = client.post("/chat/completions", json=body())
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_usage_then_error_in_stream(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", UsageThenError(), UsageThenError(status_in_stream=False))
    lines, error = partial_sse(client, body(stream=True))
    assert error is None and len(lines) == 3 and "[DONE]" not in lines
    role, usage, failure = (json.loads(line) for line in lines)
    assert role["choices"][0]["delta"]["role"] == "assistant"
    assert usage["choices"] == [] and "total_tokens" in usage["usage"]
    assert failure["error"]["type"] == "server_error" and failure["error"]["code"] == "server_error"
    assert client.post("/chat/completions", json=body(stream=True)).status_code == 500


# -- broken transports ---------------------------------------------------------------------
def test_drop_after_cuts_the_stream(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", DropAfter(2))
    lines, error = partial_sse(client, body(stream=True))
    assert isinstance(error, httpx.RemoteProtocolError)
    events = [json.loads(line) for line in lines]
    assert len(events) == 3 and content_of(events) == ["Hello from m, ", "cut short"]
    assert all(e["choices"][0]["finish_reason"] is None for e in events)
    assert upstream.wait_disconnected(1.0)
    assert upstream.requests[0].disconnected is False  # the server cut it, not the client


def test_drop_after_raises_in_the_sdk_and_non_stream(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", DropAfter(1), DropAfter(1))
    with pytest.raises(openai.APIConnectionError):
        for _ in sdk(upstream).chat.completions.create(model="m", messages=MESSAGES, stream=True):
            pass
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/chat/completions", json=body())


@pytest.mark.parametrize("how", ["clean", "malformed"])
def test_end_before_finish_ends_the_body_cleanly_without_a_finish(
    upstream: FakeUpstream, client: httpx.Client, how: str
) -> None:
    upstream.script("m", EndBeforeFinish(2, how=how))
    lines, error = partial_sse(client, body(stream=True))
    assert error is None  # the body ended like a finished one
    assert "[DONE]" not in lines
    good = [json.loads(line) for line in lines[:3]]
    assert all(e["choices"][0]["finish_reason"] is None for e in good)
    assert len(lines) == (4 if how == "malformed" else 3)
    if how == "malformed":
        with pytest.raises(json.JSONDecodeError):
            json.loads(lines[3])


def test_end_before_finish_reset_cuts_the_connection(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", EndBeforeFinish(2, how="reset"), EndBeforeFinish(2, how="reset"))
    lines, error = partial_sse(client, body(stream=True))
    assert error is not None and len(lines) == 3
    with pytest.raises(httpx.TransportError):
        client.post("/chat/completions", json=body())


def test_drop_after_can_cut_inside_reasoning_or_a_tool_call(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", DropAfter(0, "", reasoning="Let me think"))
    lines, error = partial_sse(client, body(stream=True))
    assert error is not None
    deltas = [json.loads(line)["choices"][0]["delta"] for line in lines]
    assert deltas[-1].get("reasoning_content") == "Let me think"
    assert not any(d.get("content") for d in deltas)
    upstream.script("m", DropAfter(1, "Checking.", tool_call=True))
    lines, error = partial_sse(client, body(stream=True))
    assert error is not None
    last = json.loads(lines[-1])["choices"][0]
    [call] = last["delta"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"  # it began...
    assert last["finish_reason"] is None  # ...and was cut before its arguments and finish
    assert content_of([json.loads(line) for line in lines[1:-1]]) == ["Checking."]


def test_drop_after_usage_first(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", DropAfter(1, usage_first=True))
    lines, error = partial_sse(client, body(stream=True))
    assert error is not None
    assert json.loads(lines[1])["choices"] == [] and "usage" in json.loads(lines[1])
    assert len(lines) == 3


def test_reset_closes_without_a_response(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", Reset())
    with pytest.raises(httpx.TransportError):
        client.post("/chat/completions", json=body())
    assert upstream.count("m") == 1


def test_malformed_json_body_and_stream(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", Malformed(), Malformed())
    response = client.post("/chat/completions", json=body())
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()
    lines, error = partial_sse(client, body(stream=True))
    assert error is None and lines and "[DONE]" not in lines
    for line in lines:
        with pytest.raises(ValueError):
            json.loads(line)


def test_malformed_sse_line_breaks_exactly_one_line(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    behaviour = Malformed("sse-line")
    upstream.script("m", behaviour)
    lines = sse(client, body(stream=True))
    assert lines[-1] == "[DONE]"
    good, bad = [], []
    for index, line in enumerate(lines[:-1]):
        try:
            good.append(json.loads(line))
        except ValueError:
            bad.append(index)
    assert bad == [10]  # the role chunk is line 0, content chunk n is line n
    assert len(content_of(good)) == 19
    assert "".join(content_of(good)) == behaviour.expected_content()
    assert "tok10 " not in behaviour.expected_content() and "tok11 " in behaviour.expected_content()


# -- silence and client disconnects --------------------------------------------------------
def test_silent_client_timeout_is_recorded_as_disconnect(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", Silent())
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=body(), timeout=0.1)
    gave_up = time.monotonic()
    assert upstream.wait_disconnected(1.0)
    record = upstream.requests[0]
    assert record.disconnected is True
    assert record.finished_at is not None and record.finished_at - gave_up < 1.0


def test_open_requests_counts_handlers_in_flight(upstream: FakeUpstream) -> None:
    upstream.script("m", Silent())
    payload = json.dumps(body()).encode()
    with socket.create_connection(("127.0.0.1", upstream.port)) as raw:
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: "
            b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)
        )
        deadline = time.monotonic() + 2
        while upstream.open_requests() == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert upstream.open_requests() == 1
        assert upstream.wait_disconnected(0.05) is False
    assert upstream.wait_disconnected(1.0)
    assert upstream.open_requests() == 0 and upstream.requests[0].disconnected


def test_stall_after_sends_chunks_then_stays_silent(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", StallAfter(2))
    lines, error = partial_sse(
        client, body(stream=True), timeout=1.0
    )  # a stall never ends; 1 s leaves room for a busy machine
    assert isinstance(error, httpx.ReadTimeout)
    assert content_of([json.loads(line) for line in lines]) == ["Hello from m, ", "then nothing"]
    assert upstream.wait_disconnected(1.0) and upstream.requests[0].disconnected


def test_delay_waits_before_headers_and_notices_disconnects(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", Delay(0.05, Fail(502)), Delay(30, Reply()))
    started = time.monotonic()
    assert client.post("/chat/completions", json=body()).status_code == 502
    assert time.monotonic() - started >= 0.05
    with pytest.raises(httpx.ReadTimeout):
        client.post("/chat/completions", json=body(), timeout=0.1)
    assert upstream.wait_disconnected(1.0)
    assert [r.disconnected for r in upstream.requests] == [False, True]


def test_stop_ends_silent_requests_promptly() -> None:
    up = FakeUpstream().start()
    up.script("m", Silent())
    with httpx.Client(base_url=up.base_url) as c:
        started = time.monotonic()
        with pytest.raises(httpx.TransportError):
            # The read blocks; stop() from a timer thread must release it.
            threading.Timer(0.1, up.stop).start()
            c.post("/chat/completions", json=body(), timeout=5)
    assert time.monotonic() - started < 3
    assert up.open_requests() == 0


# -- scripting and inspection --------------------------------------------------------------
def test_flaky_fails_two_of_every_three(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", then=Flaky(3, fail=Fail(503), ok=Reply()))
    statuses = [client.post("/chat/completions", json=body()).status_code for _ in range(6)]
    assert statuses == [503, 503, 200, 503, 503, 200]
    assert [Flaky(2).pick(n) == Flaky(2).ok for n in (1, 2, 3, 4)] == [False, True, False, True]
    with pytest.raises(ValueError):
        Flaky(0)


def test_script_queue_then_default(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.script("m", Fail(500), Fail(502), then=Fail(418))
    upstream.script("n", Fail(501))
    statuses = [client.post("/chat/completions", json=body()).status_code for _ in range(4)]
    assert statuses == [500, 502, 418, 418]
    assert [client.post("/chat/completions", json=body("n")).status_code for _ in range(2)] == [
        501,
        200,
    ]
    upstream.set_default(Fail(404, code="model_not_found"))
    assert client.post("/chat/completions", json=body("other")).status_code == 404
    assert upstream.count("m") == 4 and upstream.count("n") == 2 and upstream.count() == 7
    upstream.reset()
    assert client.post("/chat/completions", json=body("other")).status_code == 200


def test_requests_are_recorded_and_reset_clears_them(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("m", Fail(500))
    client.post("/chat/completions", json=body(), headers={"X-Trace": "abc"})
    (record,) = upstream.requests
    assert record.model == "m" and record.path == "/v1/chat/completions"
    assert record.body == body() and record.headers["x-trace"] == "abc"
    assert record.finished_at is not None and record.finished_at >= record.started_at
    assert record.disconnected is False
    upstream.reset()
    assert upstream.requests == [] and upstream.count() == 0
    assert client.post("/chat/completions", json=body()).status_code == 200  # script gone


def test_models_lists_configured_or_scripted_models(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.script("b", Reply())
    upstream.script("a", Reply())
    listing = client.get("/models").json()
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["b", "a"]
    with FakeUpstream(models=["x", "y"]) as fixed:
        assert [m.id for m in sdk(fixed).models.list()] == ["x", "y"]


def test_bad_request_body_is_400(client: httpx.Client) -> None:
    response = client.post(
        "/chat/completions", content=b"not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and "error" in response.json()


def test_api_key_is_required_and_echoed_on_failure() -> None:
    with FakeUpstream(api_key="right-key", models=["m"]) as up:
        with pytest.raises(openai.AuthenticationError) as denied:
            sdk(up, api_key="sk-leaked-secret").chat.completions.create(
                model="m", messages=MESSAGES
            )
        assert denied.value.code == "invalid_api_key"
        assert "sk-leaked-secret" in denied.value.message
        assert httpx.post(f"{up.base_url}/chat/completions", json=body()).status_code == 401
        assert httpx.get(f"{up.base_url}/models").status_code == 401
        answer = sdk(up, api_key="right-key").chat.completions.create(model="m", messages=MESSAGES)
        assert answer.choices[0].message.content == "Hello from m."
        assert up.count("m") == 3  # refused requests count too


def test_control_api_scripts_resets_and_reports(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    control = httpx.Client(base_url=upstream.root_url)
    script = {
        "model": "m",
        "behaviours": [{"kind": "fail", "status": 503, "headers": {"Retry-After": "2"}}],
        "then": {"kind": "delay", "seconds": 0, "then": {"kind": "empty"}},
    }
    assert control.post("/_control/script", json=script).json()["queued"] == 1
    first = client.post("/chat/completions", json=body())
    assert first.status_code == 503 and first.headers["retry-after"] == "2"
    assert (
        client.post("/chat/completions", json=body()).json()["choices"][0]["message"]["content"]
        == ""
    )
    stats = control.get("/_control/stats").json()
    assert stats == {"total": 2, "by_model": {"m": 2}, "open": 0, "disconnected": 0}
    recorded = control.get("/_control/requests").json()["requests"]
    assert [r["model"] for r in recorded] == ["m", "m"]
    bad = control.post("/_control/script", json={"model": "m", "behaviours": [{"kind": "nope"}]})
    assert bad.status_code == 400 and "nope" in bad.json()["error"]["message"]
    control.post("/_control/default", json={"behaviour": {"kind": "fail", "status": 500}})
    assert client.post("/chat/completions", json=body("unscripted")).status_code == 500
    assert control.post("/_control/reset").json() == {"ok": True}
    assert control.get("/_control/stats").json()["total"] == 0
    assert client.post("/chat/completions", json=body()).status_code == 200  # default restored
    control.close()


ALL_BEHAVIOURS: list[Behaviour] = [
    Reply(
        content="c",
        chunks=2,
        chunk_delay_s=0.5,
        reasoning="r",
        tool_call=True,
        usage=False,
        finish_reason="length",
    ),
    Fail(429, "m", code="c", type="t", headers={"Retry-After": "1"}, body="b"),
    Delay(1.5, Flaky(2, fail=Reset(), ok=Empty())),
    Silent(),
    DropAfter(2, "x", usage_first=True),
    DropAfter(0, "", reasoning="r", tool_call={"name": "Bash", "arguments": {"command": "ls"}}),
    UsageThenError(False),
    StallAfter(1),
    Malformed("sse-line", chunks=5, bad_chunk=2),
    NoDone(4),
    EndBeforeFinish(1, "y", how="malformed"),
    ContextLength(),
    ContentFilter(),
]


@pytest.mark.parametrize("behaviour", ALL_BEHAVIOURS, ids=lambda b: type(b).__name__)
def test_behaviours_round_trip_through_dicts(behaviour: Behaviour) -> None:
    data = json.loads(json.dumps(to_dict(behaviour)))
    assert behaviour_from_dict(data) == behaviour


def test_behaviour_dict_shape_and_errors() -> None:
    assert to_dict(DropAfter(2)) == {
        "kind": "drop_after",
        "chunks": 2,
        "content": DropAfter(2).content,
        "usage_first": False,
        "reasoning": "",
        "tool_call": False,
    }
    assert to_dict(Malformed("sse-line"))["variant"] == "sse-line"
    assert to_dict(UsageThenError())["kind"] == "usage_then_error"
    for bad in (
        {"kind": "nope"},
        {"kind": "fail", "colour": 1},
        {"status": 500},
        {"kind": "malformed", "variant": "xml"},
    ):
        with pytest.raises(ValueError):
            behaviour_from_dict(bad)


def test_split_pieces_joins_back() -> None:
    assert split_pieces("Hello from m.", 3) == ["Hello ", "from ", "m."]
    assert split_pieces("abc", 5) == ["a", "b", "c"]
    assert split_pieces("", 3) == []
    text = "one two three four five six seven"
    assert "".join(split_pieces(text, 4)) == text and len(split_pieces(text, 4)) == 4


# -- the demo: preset, CLI, Django command, config file ------------------------------------
def _as_in_a_terminal() -> None:
    """Ctrl-C's default action in the child, as a terminal gives it: a suite started in the
    background by a shell without job control (``make test &``) inherits SIGINT ignored,
    and Python then never raises KeyboardInterrupt, so the demo would never stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_foreground(
    args: list[str],
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_as_in_a_terminal,  # noqa: PLW1509  (only the signal; no locks taken)
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (http://127\.0\.0\.1:\d+/v1)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"no banner: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, match.group(1)


def _interrupt(proc: subprocess.Popen[str]) -> int:
    """Ctrl-C, then its exit status. ``communicate`` drains both pipes while it waits (a
    process whose output fills a pipe nobody reads would block on that write and never
    exit), and the wait is generous: a clean clone's first run on a busy machine is slow.
    A process that does not exit fails the test with what it printed."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no exit 60 s after Ctrl-C:\n{out[-2000:]}\n{err[-2000:]}") from None
    return proc.returncode


def _check_demo_models(base_url: str) -> None:
    headers = {"Authorization": f"Bearer {DEMO_API_KEY}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=5) as c:
        assert [m["id"] for m in c.get("/models").json()["data"]] == DEMO_MODELS
        flaky = [
            c.post("/chat/completions", json=body("flaky-model")).status_code for _ in range(3)
        ]
        assert flaky == [503, 503, 200]
        assert c.post("/chat/completions", json=body("broken-model")).status_code == 503
        lines = sse(c, body("steady-model", stream=True))
        assert len(content_of([json.loads(x) for x in lines[:-1]])) == 8
        assert c.post("/chat/completions", json=body("nope")).status_code == 404
        assert (
            c.post(
                "/chat/completions",
                json=body("steady-model"),
                headers={"Authorization": "Bearer wrong"},
            ).status_code
            == 401
        )


def test_cli_runs_the_demo_preset() -> None:
    proc, base_url = _run_foreground(["-m", "routing.simulator", "--port", "0", "--preset", "demo"])
    try:
        _check_demo_models(base_url)
    finally:
        assert _interrupt(proc) == 0


def test_manage_py_demo_needs_no_database(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "router_project.settings",
        # A database that cannot even be opened: the command must not touch it.
        "DATABASE_URL": f"sqlite:///{tmp_path}/missing-dir/db.sqlite3",
    }
    proc, base_url = _run_foreground(["manage.py", "demo", "--port", "0"], env=env)
    try:
        _check_demo_models(base_url)
    finally:
        assert _interrupt(proc) == 0
    assert not (tmp_path / "missing-dir").exists()


def test_demo_config_matches_the_preset() -> None:
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    provider, claude, bedrock, vertex = config["providers"]
    assert (claude["name"], claude["kind"], claude["base_url"]) == (
        "sim-claude",
        "anthropic",
        "http://127.0.0.1:${SWITCHYARD_DEMO_PORT}/v1",
    )
    assert provider["name"] == "sim" and provider["kind"] == "openai"
    assert provider["base_url"] == "http://127.0.0.1:${SWITCHYARD_DEMO_PORT}/v1"
    assert provider["api_key"] == DEMO_API_KEY and provider["models"] == DEMO_MODELS
    groups = {g["name"]: g for g in config["groups"]}
    assert [t["model"] for t in groups["auto"]["targets"]] == ["flaky-model", "steady-model"]
    assert groups["auto"]["retry"] == {"initial_delay_ms": 200, "max_retries": 2}
    assert [t["model"] for t in groups["failover"]["targets"]] == ["broken-model", "steady-model"]
    assert [(t["provider"], t["model"]) for t in groups["claude"]["targets"]] == [
        ("sim-claude", DEMO_CLAUDE),
        ("claude-bedrock", DEMO_BEDROCK_MODEL),
        ("claude-vertex", DEMO_VERTEX_MODEL),
        ("sim", "steady-model"),
    ]
    assert (bedrock["platform"], bedrock["aws_access_key_id"]) == ("bedrock", DEMO_AWS_KEY_ID)
    assert bedrock["aws_secret_access_key"] == DEMO_AWS_SECRET
    assert (vertex["platform"], vertex["credentials_file"]) == (
        "vertex",
        "${SWITCHYARD_DEMO_GOOGLE_ACCOUNT}",
    )
    assert all(
        t["provider"] == "sim" for name in ("auto", "failover") for t in groups[name]["targets"]
    )
