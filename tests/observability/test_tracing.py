"""Tracing (SPEC §18) end to end: the official SDK → Switchyard (real sockets) → the
simulator, with the gateway's spans exported over OTLP/HTTP to a real receiver that
decodes them with ``opentelemetry-proto``. Each test flushes the gateway's own tracer
provider instead of waiting for the batch processor."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from routing.gateway.events import CallRecord
from routing.observability.tracing import build_tracing, tracing_wanted
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness, settle_calls
from tests.observability.otlp_receiver import OTLPReceiver, ReceivedSpan
from tests.state.servers import free_port

SERVER, CLIENT = 2, 3  # opentelemetry.proto Span.SpanKind
ERROR = 2  # Status.StatusCode
PROMPT = "the-prompt-text-4711 please keep this private"
COMPLETION = "the-completion-text-0815"
TOOL_ARGUMENTS = '{"path": "/etc/the-tool-argument-9999"}'
# Both providers share one upstream; the second is reached through a user and a query key
# in its URL, neither of which may leave in a span.
FAILOVER = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1-SECRET
  - name: p2
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p2-SECRET
    headers: {x-extra-credential: header-secret-p2}
groups:
  - name: auto
    retry: {max_retries: 0}
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as server:
        yield server


@pytest.fixture
def traced(harness: Harness, receiver: OTLPReceiver) -> Iterator[Harness]:
    tracing = build_tracing(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "sy-test"}
    )
    assert tracing is not None
    harness.configure(FAILOVER)
    harness.runtime.tracing = tracing  # type: ignore[attr-defined]
    try:
        yield harness
    finally:
        settle_calls(harness.runtime)
        current = harness.runtime.tracing  # type: ignore[attr-defined]
        harness.runtime.tracing = None  # type: ignore[attr-defined]
        tracing.shutdown()
        if current is not None:  # a test that put its own in
            current.shutdown()


def flushed(h: Harness, receiver: OTLPReceiver, calls: int = 1) -> list[ReceivedSpan]:
    """Every span of the calls made so far, once their records are published."""
    assert len(h.events(CallRecord, at_least=calls)) >= calls
    assert h.runtime.tracing.force_flush(10_000)  # type: ignore[attr-defined]
    spans = list(receiver.spans)
    for span in spans:  # a span's attribute sets are written as one: never a key twice
        assert len(set(span.keys)) == len(span.keys), span
    return spans


def one_trace(spans: list[ReceivedSpan]) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    servers = [s for s in spans if s.kind == SERVER]
    assert len(servers) == 1, spans
    clients = sorted((s for s in spans if s.kind == CLIENT), key=lambda s: s.start_ns)
    return servers[0], clients


def test_a_failover_is_one_trace_a_server_span_and_a_client_span_per_attempt(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    h = traced
    h.upstream.script("a", Fail(503, "a is down"))
    h.upstream.script("b", Reply(COMPLETION))
    raw = h.client().chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": PROMPT}]
    )
    assert raw.parse().choices[0].message.content == COMPLETION
    server, clients = one_trace(flushed(h, receiver))

    assert server.name == "chat auto"
    assert server.parent_span_id == ""  # no traceparent from the client: a new trace
    assert server.flags == 0x100 and {c.flags for c in clients} == {0x100}  # none remote
    assert server.resource["service.name"] == "sy-test"
    assert server.status_code != ERROR
    a = server.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "auto"
    assert a["gen_ai.response.model"] == "b"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["switchyard.door"] == "chat"
    assert a["switchyard.group"] == "auto"
    assert a["switchyard.key.name"] == "test"
    assert a["switchyard.outcome"] == "ok"
    assert a["switchyard.served_by"] == "p2/b"
    assert a["switchyard.served_by_fallback"] is True
    assert a["switchyard.attempts"] == 2
    assert a["switchyard.commit_point"] == "first-content"
    assert a["switchyard.request_id"] == raw.headers["x-switchyard-request-id"]
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert "switchyard.cost" not in a  # no price: no cost, never 0

    assert [c.name for c in clients] == ["chat a", "chat b"]
    failed, served = clients
    for client in clients:
        assert client.trace_id == server.trace_id
        assert client.parent_span_id == server.span_id
        assert server.start_ns <= client.start_ns <= client.end_ns <= server.end_ns
    assert failed.end_ns <= served.start_ns  # real times: the switch happened in between
    assert failed.status_code == ERROR
    assert failed.attributes["switchyard.target"] == "p1/a"
    assert failed.attributes["switchyard.provider.kind"] == "openai"
    assert failed.attributes["gen_ai.provider.name"] == "openai"
    assert failed.attributes["gen_ai.request.model"] == "a"
    assert failed.attributes["http.response.status_code"] == 503
    assert failed.attributes["error.type"] == "SERVER"
    assert "switchyard.retry" not in failed.attributes  # it switched: no retry in place
    assert failed.attributes["switchyard.switched_to"] == "p2/b"
    assert failed.attributes["switchyard.switch.reason"]
    assert failed.attributes["server.address"] == "127.0.0.1"
    assert served.status_code != ERROR
    assert "error.type" not in served.attributes
    assert "gen_ai.usage.input_tokens" not in served.attributes  # the call's: counted once
    assert served.attributes["gen_ai.response.model"] == "b"
    assert served.attributes["switchyard.ttft_ms"] >= 0
    assert [name for name, _ in served.events] == ["gen_ai.first_token"]

    # Each attempt sent its own span's context upstream.
    sent = [r.headers["traceparent"].split("-") for r in h.upstream.requests]
    assert [s[:3] for s in sent] == [["00", c.trace_id, c.span_id] for c in clients]
    assert all(int(s[3], 16) & 1 for s in sent)  # sampled (the SDK adds W3C level 2's random)

    # The ledger row carries the trace id, and the call's page shows it.
    settle_calls(h.runtime)
    from django.contrib.auth.models import User
    from django.test import Client

    from routing.audit.models import Call

    call = Call.objects.get(call_id=a["switchyard.request_id"])
    assert call.trace_id == server.trace_id
    page = Client()
    page.force_login(User.objects.create_user("op", password="x", is_staff=True))
    html = page.get(f"/calls/{call.call_id}/").content.decode()
    assert f"<code>{server.trace_id}</code>" in html


def test_a_streamed_answer_s_attempt_lasts_until_the_stream_ends(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    h = traced
    h.upstream.script("a", Fail(503, "a is down"))
    h.upstream.script("b", Reply(COMPLETION))
    stream = h.client().chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == COMPLETION
    server, (failed, served) = one_trace(flushed(h, receiver))
    assert server.attributes["switchyard.stream"] is True
    assert server.attributes["switchyard.served_by"] == "p2/b"
    assert failed.status_code == ERROR and served.status_code != ERROR
    ((name, first_token),) = served.events
    assert name == "gen_ai.first_token"
    assert served.start_ns <= first_token <= served.end_ns <= server.end_ns
    assert served.attributes["switchyard.ttft_ms"] == pytest.approx(
        (first_token - served.start_ns) / 1e6, abs=0.01
    )


def test_a_client_traceparent_is_continued_and_its_tracestate_passed_on(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    h = traced
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    h.client().chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"traceparent": f"00-{trace_id}-{parent}-01", "tracestate": "vendor=v1"},
    )
    server, clients = one_trace(flushed(h, receiver))
    assert server.trace_id == trace_id and server.parent_span_id == parent
    assert [c.trace_id for c in clients] == [trace_id]
    assert server.flags == 0x300 and [c.flags for c in clients] == [0x100]  # remote parent
    record = h.upstream.requests[0]
    assert record.headers["traceparent"].startswith(f"00-{trace_id}-{clients[0].span_id}-")
    assert record.headers["tracestate"] == "vendor=v1"


@pytest.mark.parametrize(
    "traceparent",
    [
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01x",
    ],
)
def test_a_malformed_traceparent_starts_a_new_trace_and_is_never_an_error(
    traced: Harness, receiver: OTLPReceiver, traceparent: str
) -> None:
    h = traced
    reply = h.client().chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"traceparent": traceparent},
    )
    assert reply.choices[0].message.content
    server, _ = one_trace(flushed(h, receiver))
    assert server.parent_span_id == ""
    assert server.trace_id != "0" * 32 and server.trace_id not in traceparent.lower()


def test_failed_calls_are_errors_and_every_door_is_traced(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    h = traced
    h.upstream.script("a", then=Fail(503, "a is down"))
    h.upstream.script("b", then=Fail(500, "b is down"))
    chat = httpx.post(
        f"{h.gateway.base_url}/chat/completions",
        headers={"authorization": f"Bearer {h.key}"},
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert chat.status_code == 502
    h.upstream.reset()
    messages = httpx.post(
        f"{h.gateway.base_url}/messages",
        headers={"x-api-key": h.key, "anthropic-version": "2023-06-01"},
        json={"model": "auto", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
    )
    responses = httpx.post(
        f"{h.gateway.base_url}/responses",
        headers={"authorization": f"Bearer {h.key}"},
        json={"model": "auto", "input": "hi"},
    )
    embeddings = httpx.post(
        f"{h.gateway.base_url}/embeddings",
        headers={"authorization": f"Bearer {h.key}"},
        json={"model": "auto", "input": "hi"},
    )
    assert [messages.status_code, responses.status_code, embeddings.status_code] == [200] * 3
    spans = flushed(h, receiver, calls=4)
    servers = {s.attributes["switchyard.door"]: s for s in spans if s.kind == SERVER}
    assert set(servers) == {"chat", "messages", "responses", "embeddings"}
    failed = servers["chat"]
    assert failed.status_code == ERROR
    assert failed.attributes["switchyard.outcome"] == "failed"
    assert failed.attributes["error.type"] == "ROUTES_EXHAUSTED"
    assert failed.attributes["http.response.status_code"] == 502
    assert servers["embeddings"].name == "embeddings auto"
    assert servers["messages"].attributes["gen_ai.usage.output_tokens"] > 0
    assert all(servers[d].status_code != ERROR for d in ("messages", "responses", "embeddings"))
    assert len({s.trace_id for s in servers.values()}) == 4


def test_no_credential_prompt_completion_or_tool_argument_is_ever_exported(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    h = traced
    h.upstream.script("a", Fail(503, f"a is down, and says so quoting: {PROMPT}"))
    h.upstream.script("b", Reply(COMPLETION))
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    history = [
        {"role": "user", "content": PROMPT},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": TOOL_ARGUMENTS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "the-tool-result-3333"},
    ]
    h.client().chat.completions.create(model="auto", messages=history, tools=tools)  # type: ignore[arg-type]
    h.client().chat.completions.create(
        model="auto", messages=[{"role": "user", "content": PROMPT}], stream=True
    ).close()
    flushed(h, receiver, calls=2)
    exported = b"".join(receiver.bodies)
    assert exported  # something was exported, and none of this is in it:
    for secret in (
        h.key,
        h.key[-12:],
        "upstream-key-p1-SECRET",
        "upstream-key-p2-SECRET",
        "header-secret-p2",
        "the-prompt-text-4711",
        COMPLETION,
        "the-tool-argument-9999",
        "the-tool-result-3333",
    ):
        assert secret.encode() not in exported, secret


def test_a_collector_that_is_down_costs_the_call_nothing_and_is_logged_once(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    tracing = build_tracing(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nobody there
            "OTEL_EXPORTER_OTLP_TIMEOUT": "0.2",  # give up at once rather than back off
        }
    )
    assert tracing is not None
    h.configure(FAILOVER)
    h.runtime.tracing = tracing  # type: ignore[attr-defined]
    try:
        with caplog.at_level(logging.INFO):
            for n in range(1, 4):
                reply = h.client().chat.completions.create(
                    model="auto", messages=[{"role": "user", "content": "hi"}]
                )
                assert reply.choices[0].message.content
                assert len(h.events(CallRecord, at_least=n)) == n
                tracing.force_flush(5_000)  # each flush is a failed export
    finally:
        h.runtime.tracing = None  # type: ignore[attr-defined]
        tracing.shutdown()
    calls = h.events(CallRecord)
    assert [c.outcome.value for c in calls] == ["ok"] * 3
    assert all(c.trace_id for c in calls)
    said = [r for r in caplog.records if "trace export" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].name == "switchyard.tracing" and "not per call" in said[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]


def test_off_by_default_the_call_path_has_no_tracing_and_never_loads_the_sdk(
    harness: Harness,
) -> None:
    h = harness
    assert h.runtime.tracing is None  # type: ignore[attr-defined]
    h.configure(FAILOVER)
    h.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    (record,) = h.events(CallRecord, at_least=1)
    assert record.trace_id == ""
    assert "traceparent" not in h.upstream.requests[0].headers
    # A gateway process started without OTEL_* variables loads no tracing SDK or exporter
    # (redis-py imports the metrics SDK for an integration of its own, inert unless set up).
    probe = (
        "import os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
        "'router_project.settings'); django.setup(); import router_project.asgi, "
        "routing.gateway.call, routing.api.doors; "
        "from routing.gateway.runtime import Runtime; from routing.state.memory import "
        "MemoryStore; from routing.observability.tracing import build_tracing; "
        "assert build_tracing(os.environ) is None; "
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk.trace', "
        "'opentelemetry.exporter', 'routing.observability.span'))))"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_only_an_otlp_endpoint_turns_tracing_on(env: dict[str, str], on: bool) -> None:
    assert tracing_wanted(env) is on


def test_the_sampler_endpoint_and_resource_come_from_the_standard_variables(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    """A sampled-out call still sends a traceparent (not sampled) upstream, exports
    nothing and leaves no trace id in the ledger; the signal endpoint is used as given."""
    h = traced
    h.runtime.tracing.shutdown()  # type: ignore[attr-defined]
    off = build_tracing(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/custom/path",
            "OTEL_TRACES_SAMPLER": "always_off",
        }
    )
    assert off is not None
    h.runtime.tracing = off  # type: ignore[attr-defined]
    h.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}])
    (record,) = h.events(CallRecord, at_least=1)
    assert record.trace_id == ""
    version, trace_id, span_id, flags = h.upstream.requests[0].headers["traceparent"].split("-")
    assert (version, len(trace_id), len(span_id), flags) == ("00", 32, 16, "00")
    assert off.force_flush(5_000)
    assert receiver.spans == []
    off.shutdown()

    on = build_tracing(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/custom/path",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,team=infra%2Cops",
        }
    )
    assert on is not None
    h.runtime.tracing = on  # type: ignore[attr-defined]
    h.client().chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}])
    assert len(h.events(CallRecord, at_least=2)) == 2
    assert on.force_flush(5_000)
    assert set(receiver.paths) == {"/custom/path"}
    server, _ = one_trace(receiver.spans)
    assert server.resource["deployment.environment"] == "test"
    assert server.resource["team"] == "infra,ops"
    assert server.resource["service.name"] == "switchyard"


def test_grpc_without_its_extra_leaves_tracing_off_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import importlib.util

    installed = importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None
    with caplog.at_level(logging.ERROR, logger="switchyard.tracing"):
        tracing = build_tracing(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        )
    if installed:  # the extra (not in dev) is here: gRPC it is
        assert tracing is not None
        tracing.shutdown()
        return
    assert tracing is None
    assert "grpc extra" in caplog.text


LIMITED = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}"}
groups:
  - name: capped
    limits: {rpm: 1}
    targets:
      - {provider: p1, model: a}
"""


def test_every_refused_request_is_one_error_span_continuing_the_client_trace(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    """Refused at the door before a call exists (bad key, bad body, unknown model) or by
    a limit (429): each is one SERVER span with status error and the refusal's code,
    in the client's trace, and its ledger row carries the trace id."""
    h = traced
    h.configure(LIMITED)
    clock = h.runtime.clock  # type: ignore[attr-defined]
    h.runtime.clock = lambda: 1_796_405_430.0  # type: ignore[attr-defined]  # one minute
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    url, key = h.gateway.base_url, {"authorization": f"Bearer {h.key}"}

    def post(path: str, n: int, headers: dict[str, str], **body: object) -> httpx.Response:
        parent = {"traceparent": f"00-{trace_id}-{n:016x}-01"}
        return httpx.post(f"{url}{path}", headers={**headers, **parent}, **body)  # type: ignore[arg-type]

    chat = {"messages": [{"role": "user", "content": PROMPT}]}
    sent = [
        post("/chat/completions", 1, key, json={"model": "no-such-model-xyz", **chat}),
        post("/chat/completions", 2, key, content=b'{"model": "capped", ' + PROMPT.encode()),
        post("/messages", 3, {"x-api-key": "sk-wrong-SECRET-1234"}, json={"model": "capped"}),
        post("/chat/completions", 4, key, json={"model": "capped", **chat}),  # the one allowed
        post("/chat/completions", 5, key, json={"model": "capped", **chat}),  # over rpm
    ]
    assert [r.status_code for r in sent] == [404, 400, 401, 200, 429]
    spans = flushed(h, receiver, calls=5)
    h.runtime.clock = clock  # type: ignore[attr-defined]
    servers = {int(s.parent_span_id, 16): s for s in spans if s.kind == SERVER}
    assert sorted(servers) == [1, 2, 3, 4, 5]  # one SERVER span per request
    assert {s.trace_id for s in spans} == {trace_id}  # every one continued the client's
    assert {s.flags for s in servers.values()} == {0x300}  # its parent: the client's
    refused = {n: servers[n] for n in (1, 2, 3, 5)}
    for n, span in refused.items():
        assert span.status_code == ERROR, n
        assert span.attributes["switchyard.outcome"] == "refused"
        assert span.attributes["http.response.status_code"] == sent[n - 1].status_code
        assert span.start_ns <= span.end_ns
    assert servers[4].status_code != ERROR
    assert [refused[n].attributes["switchyard.door"] for n in (1, 2, 3, 5)] == [
        "chat",
        "chat",
        "messages",
        "chat",
    ]
    assert refused[1].attributes["switchyard.key.name"] == "test"
    assert "switchyard.key.name" not in refused[3].attributes  # no key was recognised
    codes = [refused[n].attributes["error.type"] for n in (1, 2, 3, 5)]
    assert codes == [
        sent[0].json()["error"]["code"],
        "invalid_json",
        "invalid_api_key",
        "rpm_limit",
    ]
    assert [refused[n].status_message for n in (1, 2, 3, 5)] == codes
    assert refused[5].attributes["switchyard.group"] == "capped"
    exported = b"".join(receiver.bodies)
    for secret in (h.key, "sk-wrong-SECRET-1234", "the-prompt-text-4711", "no-such-model-xyz"):
        assert secret.encode() not in exported, secret

    settle_calls(h.runtime)
    from routing.audit.models import Call

    rows = {row.call_id: row for row in Call.objects.filter(outcome="refused")}
    assert len(rows) == 4
    by_request = {s.attributes["switchyard.request_id"]: s for s in refused.values()}
    assert {cid: rows[cid].trace_id for cid in rows} == {cid: trace_id for cid in by_request}


def test_a_compaction_call_continues_the_client_trace_too(
    traced: Harness, receiver: OTLPReceiver
) -> None:
    """``/v1/responses/compact`` is a call like any other (SPEC §18: every call at every
    door): its span continues the client's ``traceparent`` and its attempt sends its own."""
    h = traced
    h.configure(
        """
providers:
  - {name: r, kind: openai-responses, base_url: "{upstream}", api_key: k}
groups:
  - name: codex
    targets: [{provider: r, model: r1}]
"""
    )
    h.upstream.script("r1", Reply("summary of the conversation"))
    trace_id, parent = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
    response = httpx.post(
        f"{h.gateway.base_url}/responses/compact",
        json={"model": "codex", "input": [{"role": "user", "content": "a long conversation"}]},
        headers={
            "authorization": f"Bearer {h.key}",
            "traceparent": f"00-{trace_id}-{parent}-01",
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    server, clients = one_trace(flushed(h, receiver))
    assert server.trace_id == trace_id and server.parent_span_id == parent
    sent = [r for r in h.upstream.requests if r.model == "r1"][-1]
    assert sent.path == "/v1/responses/compact"
    assert sent.headers["traceparent"].startswith(f"00-{trace_id}-{clients[0].span_id}-")
