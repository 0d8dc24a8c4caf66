"""Mid-stream rescue (SPEC §16, issue 24 item 5) against the scripted upstream: a cut and
a stall after the commit point, restart and prefill, a diverging restart, a prefill
learned to be refused; at the chat door, the Messages door (pass-through and translated)
and the Responses door (translated and pass-through)."""

from __future__ import annotations

import openai
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import DropAfter, Fail, Reply, StallAfter
from tests.conftest import Harness

MESSAGES = [{"role": "user", "content": "What is the answer?"}]
SENT = "The answer is "  # what the cut stream gave the client, in two chunks
WHOLE = "The answer is forty-two, as everyone knows."

RESUMING = """
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
    resume: restart
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
"""
PREFILL = RESUMING.replace(
    "{provider: p2, model: b}", "{provider: p2, model: b, capabilities: {prefill: true}}"
)


def stream(h: Harness, usage: list[object] | None = None) -> tuple[str, Exception | None]:
    text, error = "", None
    try:
        for chunk in h.client().chat.completions.create(
            model="auto", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        ):
            if chunk.usage is not None and usage is not None:
                usage.append(chunk.usage)
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
    except openai.APIError as exc:
        error = exc
    return text, error


def record(h: Harness) -> CallRecord:
    [call] = h.events(CallRecord, at_least=1)
    return call


@pytest.mark.parametrize(
    "cut", [DropAfter(2, content=SENT), StallAfter(2, content=SENT)], ids=["cut", "stall"]
)
def test_a_restart_elsewhere_relays_only_what_the_client_does_not_have(
    harness: Harness, cut: object
) -> None:
    harness.configure(RESUMING)
    harness.upstream.script("a", cut)
    harness.upstream.script("b", Reply(WHOLE, chunks=6))
    usage: list[object] = []
    text, error = stream(harness, usage)
    assert error is None
    assert len(usage) == 1  # counted once
    assert text == WHOLE  # never "The answer is The answer is ..."
    [_, restart] = harness.upstream.requests
    assert restart.body["messages"] == MESSAGES  # no prefill: b does not take one
    call = record(harness)
    assert call.outcome == "ok"
    assert call.trail().endswith("p2/b:continuation")
    assert call.usage is not None  # the continuation's, counted once


def test_a_diverging_restart_is_never_spliced(harness: Harness) -> None:
    harness.configure(RESUMING)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Reply("Well, it depends on the question.", chunks=4))
    text, error = stream(harness)
    assert text == SENT
    assert error is not None and "diverged" in str(error)
    assert record(harness).outcome == "failed"


def test_a_prefill_target_continues_from_the_partial_text(harness: Harness) -> None:
    harness.configure(PREFILL)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Reply("forty-two, as everyone knows.", chunks=3))
    text, error = stream(harness)
    assert error is None and text == WHOLE
    [_, rescue] = harness.upstream.requests
    assert rescue.body["messages"] == [*MESSAGES, {"role": "assistant", "content": SENT}]
    assert record(harness).trail().endswith("p2/b:continuation")


def test_a_refused_prefill_is_learned_without_a_health_charge(harness: Harness) -> None:
    from asgiref.sync import async_to_sync

    harness.configure(PREFILL)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script(
        "b", Fail(400, "assistant prefill is not supported"), Reply(WHOLE, chunks=5)
    )
    text, error = stream(harness)
    assert error is None and text == WHOLE
    [_, prefilled, restart] = harness.upstream.requests
    assert prefilled.body["messages"][-1]["role"] == "assistant"
    assert restart.body["messages"] == MESSAGES
    assert "p2/b" in harness.runtime.no_prefill
    snapshot = async_to_sync(harness.runtime.store.snapshot)(["p2/b"], ["p2"])
    assert "p2/b" not in snapshot.targets  # never charged: the request was at fault


def test_without_resume_the_honest_error_event_stands(harness: Harness) -> None:
    harness.configure(RESUMING.replace("    resume: restart\n", ""))
    harness.upstream.script("a", DropAfter(2, content=SENT))
    text, error = stream(harness)
    assert text == SENT and error is not None
    assert harness.upstream.count("b") == 0


# -- the other doors ----------------------------------------------------------------------
DOORS = """
providers:
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
groups:
  - name: claudes
    resume: restart
    targets:
      - {provider: claude, model: a1}
      - {provider: claude, model: a2, capabilities: {prefill: PREFILL}}
  - name: chats
    resume: restart
    targets:
      - {provider: chat, model: c1}
      - {provider: chat, model: c2}
"""


def messages_stream(h: Harness, model: str) -> tuple[str, Exception | None, object]:
    import anthropic

    client = anthropic.Anthropic(base_url=h.gateway.url, api_key=h.key, max_retries=0)
    text, error, final = "", None, None
    try:
        with client.messages.stream(
            model=model, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ) as events:
            for event in events:
                if event.type == "text":
                    text += event.text
            final = events.get_final_message()
    except anthropic.APIError as exc:
        error = exc
    return text, error, final


@pytest.mark.parametrize("prefill", [False, True], ids=["restart", "prefill"])
def test_the_messages_door_continues_a_pass_through_stream(harness: Harness, prefill: bool) -> None:
    harness.configure(DOORS.replace("PREFILL", "true" if prefill else "false"))
    harness.upstream.script("a1", DropAfter(2, content=SENT))
    rest = "forty-two, as everyone knows." if prefill else WHOLE
    harness.upstream.script("a2", Reply(rest, chunks=4))
    text, error, final = messages_stream(harness, "claudes")
    assert error is None and text == WHOLE
    assert final is not None and final.stop_reason == "end_turn"  # type: ignore[attr-defined]
    [_, rescue] = harness.upstream.requests
    last = rescue.body["messages"][-1]
    if prefill:
        assert last == {"role": "assistant", "content": SENT}
    else:
        assert last["role"] == "user"
    assert record(harness).trail().endswith("claude/a2:continuation")


def test_the_messages_door_continues_a_translated_stream(harness: Harness) -> None:
    harness.configure(
        DOORS.replace("PREFILL", "false").replace(
            "api_key: upstream-key-chat",
            "api_key: upstream-key-chat\n    timeouts: {idle_s: 0.6, first_token_s: 0.6}",
        )
    )
    harness.upstream.script("c1", StallAfter(2, content=SENT))  # a stall, this time
    harness.upstream.script("c2", Reply(WHOLE, chunks=5))
    text, error, _ = messages_stream(harness, "chats")
    assert error is None and text == WHOLE


def test_the_messages_door_never_splices_a_diverging_restart(harness: Harness) -> None:
    harness.configure(DOORS.replace("PREFILL", "false"))
    harness.upstream.script("a1", DropAfter(2, content=SENT))
    harness.upstream.script("a2", Reply("Something else entirely.", chunks=3))
    text, error, _ = messages_stream(harness, "claudes")
    assert text == SENT and error is not None and "diverged" in str(error)


def test_the_responses_door_continues_a_translated_stream(harness: Harness) -> None:
    harness.configure(DOORS.replace("PREFILL", "false"))
    harness.upstream.script("c1", DropAfter(2, content=SENT))
    harness.upstream.script("c2", Reply(WHOLE, chunks=5))
    text, error = "", None
    try:
        with harness.client().responses.stream(model="chats", input="hi") as events:
            for event in events:
                if event.type == "response.output_text.delta":
                    text += event.delta
            final = events.get_final_response()
        assert final.output_text == WHOLE
    except openai.APIError as exc:
        error = exc
    assert error is None and text == WHOLE


def test_a_rescue_that_probes_a_cooling_target_records_its_verdict(harness: Harness) -> None:
    from asgiref.sync import async_to_sync

    from routing.engine.failures import Failure, FailureCode
    from routing.engine.health import CircuitPolicy

    harness.configure(RESUMING)
    store = harness.runtime.store
    clock = harness.runtime.clock
    # b cooled a while ago and its window is over: the rescue is its probe
    async_to_sync(store.record_failure)(
        "p2/b",
        Failure(FailureCode.SERVER, "x", 500),
        CircuitPolicy(),
        clock() - 60,
        was_probe=False,
    )
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Reply(WHOLE, chunks=6))
    text, error = stream(harness)
    assert error is None and text == WHOLE
    snapshot = async_to_sync(store.snapshot)(["p2/b"], ["p2"])
    assert "p2/b" not in snapshot.targets or snapshot.targets["p2/b"].state == "healthy"


# -- the Responses door, Responses upstream (pass-through) -----------------------------------
RESPONSES = """
providers:
  - name: resp
    kind: openai-responses
    base_url: {upstream}
    api_key: upstream-key-resp
    timeouts: {connect_s: 2, first_token_s: 0.6, idle_s: 0.6, total_s: 10}
groups:
  - name: resps
    resume: restart
    targets:
      - {provider: resp, model: r1}
      - {provider: resp, model: r2, capabilities: {prefill: true}}
"""


def responses_stream(h: Harness) -> tuple[list[object], object, Exception | None]:
    """Every event the official SDK validated and handed out, its final response, and
    the error it raised (a ``response.failed`` event is handed out, not raised)."""
    events: list[object] = []
    final, error = None, None
    try:
        with h.client().responses.stream(model="resps", input="hi") as stream:
            for event in stream:
                events.append(event)
            if events and events[-1].type == "response.completed":
                final = stream.get_final_response()
    except (openai.APIError, RuntimeError) as exc:  # RuntimeError: the SDK's checks
        error = exc
    return events, final, error


def text_of(events: list[object]) -> str:
    return "".join(
        e.delta  # type: ignore[attr-defined]
        for e in events
        if e.type == "response.output_text.delta"  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize(
    "cut", [DropAfter(2, content=SENT), StallAfter(2, content=SENT)], ids=["cut", "stall"]
)
def test_the_responses_door_continues_a_pass_through_stream(harness: Harness, cut: object) -> None:
    harness.configure(RESPONSES)
    harness.upstream.script("r1", cut)
    harness.upstream.script("r2", Reply(WHOLE, chunks=6))
    events, final, error = responses_stream(harness)
    assert error is None
    assert text_of(events) == WHOLE  # never "The answer is The answer is ..."
    numbers = [e.sequence_number for e in events]  # type: ignore[attr-defined]
    assert numbers == list(range(len(events)))  # one numbering, as one response
    kinds = [e.type for e in events]  # type: ignore[attr-defined]
    assert kinds.count("response.created") == 1 and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == 1  # the open message went on
    created = events[0].response  # type: ignore[attr-defined]
    [added] = [e for e in events if e.type == "response.output_item.added"]  # type: ignore[attr-defined]
    deltas = {e.item_id for e in events if e.type == "response.output_text.delta"}  # type: ignore[attr-defined]
    assert deltas == {added.item.id}  # type: ignore[attr-defined]
    assert final is not None
    assert final.id == created.id  # type: ignore[attr-defined]
    assert final.output_text == WHOLE  # type: ignore[attr-defined]
    [item] = final.output  # type: ignore[attr-defined]
    assert item.id == added.item.id and item.status == "completed"  # type: ignore[attr-defined]
    assert final.usage is not None and final.usage.output_tokens > 0  # type: ignore[attr-defined]
    [_, restart] = harness.upstream.requests
    assert restart.path == "/v1/responses"
    assert restart.body["model"] == "r2"
    assert restart.body["input"] == "hi"  # a restart: Responses has no assistant prefill
    call = record(harness)
    assert call.outcome == "ok"
    assert call.trail().endswith("resp/r2:continuation")
    assert call.usage is not None  # the continuation's, counted once


def test_the_responses_door_never_splices_a_diverging_restart(harness: Harness) -> None:
    harness.configure(RESPONSES)
    harness.upstream.script("r1", DropAfter(2, content=SENT))
    harness.upstream.script("r2", Reply("Something else entirely.", chunks=3))
    events, final, error = responses_stream(harness)
    assert error is None and final is None  # response.failed is handed out, not raised
    assert text_of(events) == SENT
    failed = events[-1]
    assert failed.type == "response.failed"  # type: ignore[attr-defined]
    assert "diverged" in failed.response.error.message  # type: ignore[attr-defined]
    assert failed.response.id == events[0].response.id  # type: ignore[attr-defined]
    numbers = [e.sequence_number for e in events]  # type: ignore[attr-defined]
    assert numbers == list(range(len(events)))
    assert record(harness).outcome == "failed"


# -- the trail note: the header went out before the rescue --------------------------------
def raw_stream(h: Harness, path: str, body: dict[str, object]) -> tuple[str, str]:
    """The ``x-switchyard-trail`` header and the whole body of a stream, as bytes on the
    wire (no SDK in between to drop SSE comments)."""
    import httpx

    headers = {"authorization": f"Bearer {h.key}"}
    with httpx.stream(
        "POST", h.gateway.url + path, json={**body, "stream": True}, headers=headers, timeout=10
    ) as response:
        assert response.status_code == 200
        return response.headers["x-switchyard-trail"], response.read().decode()


RAW = {
    "chat": (RESUMING, "a", "b", "/v1/chat/completions", {"model": "auto", "messages": MESSAGES}),
    "messages": (
        DOORS.replace("PREFILL", "false"),
        "a1",
        "a2",
        "/v1/messages",
        {"model": "claudes", "max_tokens": 100, "messages": MESSAGES},
    ),
    "responses": (RESPONSES, "r1", "r2", "/v1/responses", {"model": "resps", "input": "hi"}),
}
END = {  # where each door's normal end begins
    "chat": "data: [DONE]",
    "messages": "event: content_block_stop",
    "responses": "event: response.output_text.done",
}
TEXT = {"chat": '"content":', "messages": "text_delta", "responses": "output_text.delta"}


@pytest.mark.parametrize("door", RAW)
def test_a_rescued_stream_names_its_trail_before_its_end(harness: Harness, door: str) -> None:
    config, first, second, path, body = RAW[door]
    harness.configure(config)
    harness.upstream.script(first, DropAfter(2, content=SENT))
    harness.upstream.script(second, Reply(WHOLE, chunks=6))
    header, text = raw_stream(harness, path, body)
    trail = record(harness).trail()
    assert trail.endswith(f"/{second}:continuation")
    assert header == trail.split(",")[0]  # the commit point's: before the rescue
    note = f": x-switchyard-trail: {trail}\n\n"
    assert text.count("\n: x-switchyard-trail: ") == 1
    at = text.index(note)
    assert text.rindex(TEXT[door]) < at  # after the last text...
    assert text.index(END[door], at) == at + len(note)  # ...right before the end


@pytest.mark.parametrize("door", RAW)
def test_a_stream_that_was_not_rescued_carries_no_comment(harness: Harness, door: str) -> None:
    config, first, second, path, body = RAW[door]
    harness.configure(config)
    harness.upstream.script(first, Reply(WHOLE, chunks=3))
    header, text = raw_stream(harness, path, body)
    assert header == f"{record(harness).trail()}"
    assert not text.startswith(":") and "\n:" not in text
    harness.configure(config.replace("    resume: restart\n", ""))
    harness.upstream.script(first, DropAfter(2, content=SENT))  # cut, and resume is off
    _, text = raw_stream(harness, path, body)
    assert not text.startswith(":") and "\n:" not in text
    assert harness.upstream.count(second) == 0


def test_a_failed_rescue_names_its_trail_before_the_error_event(harness: Harness) -> None:
    harness.configure(RESUMING)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Reply("Well, it depends on the question.", chunks=4))
    _, text = raw_stream(harness, *RAW["chat"][3:])
    before, after = text.split(": x-switchyard-trail: p1/a:ok,p2/b:continuation\n\n")
    assert "Well" not in before  # nothing of the diverging restart was relayed
    assert after.startswith("data: {") and "diverged" in after  # the error event follows
    assert "[DONE]" not in after


def test_sdks_read_a_rescued_stream_whole_past_the_note(harness: Harness) -> None:
    """The official SDKs parse the comment away: the text is whole, the end is clean."""
    harness.configure(RESUMING)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Reply(WHOLE, chunks=6))
    text, error = stream(harness)
    assert error is None and text == WHOLE
    harness.configure(DOORS.replace("PREFILL", "false"))
    harness.upstream.script("a1", DropAfter(2, content=SENT))
    harness.upstream.script("a2", Reply(WHOLE, chunks=6))
    text, error, final = messages_stream(harness, "claudes")
    assert error is None and text == WHOLE
    assert final is not None and final.stop_reason == "end_turn"  # type: ignore[attr-defined]
    harness.configure(RESPONSES)
    harness.upstream.script("r1", DropAfter(2, content=SENT))
    harness.upstream.script("r2", Reply(WHOLE, chunks=6))
    events, response, error = responses_stream(harness)
    assert error is None and text_of(events) == WHOLE
    assert response is not None and response.output_text == WHOLE  # type: ignore[attr-defined]
    calls = harness.events(CallRecord, at_least=3)
    assert [c.outcome for c in calls] == ["ok", "ok", "ok"]


def test_a_rescue_no_target_answered_still_names_what_it_tried(harness: Harness) -> None:
    harness.configure(RESUMING)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", Fail(500, "down too"))
    header, text = raw_stream(harness, *RAW["chat"][3:])
    assert header == "p1/a:ok"
    before, after = text.split(": x-switchyard-trail: p1/a:ok,p2/b:SERVER:500\n\n")
    assert SENT.split()[-1] in before  # after what the client had got
    assert after.startswith("data: {") and "[DONE]" not in after  # the first cut's error
    assert record(harness).outcome == "failed"


# -- resume: continuation rescues by prefill only (issue 41 item 3) -------------------------
LEARNING = """
providers:
  - name: claude
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-claude
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
groups:
  - name: claudes
    resume: continuation
    targets:
      - {provider: claude, model: a1}
      - {provider: claude, model: a2}
      - {provider: claude, model: a3}
  - name: chats
    resume: continuation
    targets:
      - {provider: chat, model: c1}
      - {provider: chat, model: c2, capabilities: {prefill: true}}
      - {provider: chat, model: c3, capabilities: {prefill: true}}
"""
REST = "forty-two, as everyone knows."


def _chat_door(h: Harness) -> tuple[str, Exception | None]:
    text, error = "", None
    try:
        for chunk in h.client().chat.completions.create(
            model="chats", messages=MESSAGES, stream=True
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
    except openai.APIError as exc:
        error = exc
    return text, error


def _messages_door(h: Harness) -> tuple[str, Exception | None]:
    text, error, _ = messages_stream(h, "claudes")
    return text, error


def _responses_door(h: Harness) -> tuple[str, Exception | None]:
    text, error = "", None
    try:
        with h.client().responses.stream(model="chats", input="hi") as events:
            for event in events:
                if event.type == "response.output_text.delta":
                    text += event.delta
    except openai.APIError as exc:
        error = exc
    return text, error


LEARNING_DOORS = {
    # door: how to call it, the targets (cut, refuses a prefill, takes it), their provider
    "chat": (_chat_door, ("c1", "c2", "c3"), "chat"),
    "messages": (_messages_door, ("a1", "a2", "a3"), "claude"),  # undeclared: Anthropic
    "responses": (_responses_door, ("c1", "c2", "c3"), "chat"),  # translated
}


@pytest.mark.parametrize("door", LEARNING_DOORS)
def test_a_refused_prefill_is_learned_and_the_next_target_continues(
    harness: Harness, door: str
) -> None:
    """A 400 to a prefill teaches ``prefill: false`` without a health charge, and the next
    eligible target is tried with the prefill, never a restart: an Anthropic target takes
    one undeclared, a chat target when it declares it."""
    from asgiref.sync import async_to_sync

    call_door, (cut, refuses, takes), provider = LEARNING_DOORS[door]
    harness.configure(LEARNING)
    harness.runtime.no_prefill.clear()  # learned per process: not from another door's run
    harness.upstream.script(cut, DropAfter(2, content=SENT))
    harness.upstream.script(refuses, Fail(400, "assistant prefill is not supported"))
    harness.upstream.script(takes, Reply(REST, chunks=3))
    text, error = call_door(harness)
    assert error is None and text == WHOLE
    [_, refused, prefilled] = harness.upstream.requests
    assert refused.body["messages"][-1]["role"] == "assistant"
    assert prefilled.body["messages"][-1] == {"role": "assistant", "content": SENT}
    assert f"{provider}/{refuses}" in harness.runtime.no_prefill
    snapshot = async_to_sync(harness.runtime.store.snapshot)([f"{provider}/{refuses}"], [provider])
    assert f"{provider}/{refuses}" not in snapshot.targets  # the request was at fault
    assert record(harness).trail().endswith(f"{provider}/{takes}:continuation")


def test_without_a_prefill_target_continuation_ends_at_once_without_a_second_answer(
    harness: Harness,
) -> None:
    """b is a chat target that declares no prefill: under ``continuation`` it is passed
    over (a restart is opt-in, ``resume: restart``), so the honest error event ends the
    stream at once and b is never asked for an answer it would almost never reproduce."""
    harness.configure(RESUMING.replace("resume: restart", "resume: continuation"))
    harness.upstream.script("a", DropAfter(2, content=SENT))
    text, error = stream(harness)
    assert text == SENT and error is not None
    assert harness.upstream.count("b") == 0
    assert [a.continuation for a in record(harness).attempts] == [False]


def test_restart_keeps_the_never_after_a_tool_call_began_rule(harness: Harness) -> None:
    harness.configure(RESUMING)  # resume: restart
    harness.upstream.script("a", DropAfter(2, content=SENT, tool_call=True))
    text, error = stream(harness)
    assert error is not None
    assert harness.upstream.count("b") == 0
