"""Where a mid-stream rescue stops (SPEC §16), end to end through the gateway and the
scripted upstream, at each door and kind: a cut after a tool call began, or inside
reasoning, ends in the door's error event with no continuation tried; a cut after the
reasoning, in the text, is rescued."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import openai
import pytest

from routing.simulator.script import DropAfter, Reply
from tests.conftest import Harness
from tests.gateway.test_rescue import (
    DOORS,
    RESPONSES,
    RESUMING,
    SENT,
    WHOLE,
    messages_stream,
    record,
    responses_stream,
    stream,
    text_of,
)


@dataclass(frozen=True)
class Door:
    """One door and upstream kind: the configuration, the two targets' models, and how a
    client streams through it: (the text it got, whether the stream ended in an error)."""

    config: str
    cut: str  # the first target's model, which cuts the stream
    rescuer: str  # the second target's model
    read: Callable[[Harness], tuple[str, bool]]


def read_chat(h: Harness) -> tuple[str, bool]:
    text, error = stream(h)
    return text, error is not None


def read_messages(group: str) -> Callable[[Harness], tuple[str, bool]]:
    def read(h: Harness) -> tuple[str, bool]:
        text, error, _ = messages_stream(h, group)
        return text, error is not None

    return read


def read_responses(h: Harness) -> tuple[str, bool]:
    events, final, error = responses_stream(h)
    failed = bool(events) and events[-1].type == "response.failed"  # type: ignore[attr-defined]
    assert error is None  # response.failed is handed out, not raised
    return text_of(events), failed and final is None


def read_responses_translated(h: Harness) -> tuple[str, bool]:
    text, failed = "", False
    try:
        with h.client().responses.stream(model="chats", input="hi") as events:
            for event in events:
                if event.type == "response.output_text.delta":
                    text += event.delta
                failed = failed or event.type == "response.failed"
    except openai.APIError:
        failed = True
    return text, failed


NO_PREFILL = DOORS.replace("PREFILL", "false")
DOOR_CASES = {
    "chat": Door(RESUMING, "a", "b", read_chat),
    "messages-pass-through": Door(NO_PREFILL, "a1", "a2", read_messages("claudes")),
    "messages-translated": Door(NO_PREFILL, "c1", "c2", read_messages("chats")),
    "responses-pass-through": Door(RESPONSES, "r1", "r2", read_responses),
    "responses-translated": Door(NO_PREFILL, "c1", "c2", read_responses_translated),
}


def assert_not_rescued(h: Harness, door: Door, text: str, failed: bool, sent: str) -> None:
    assert failed  # the door's own error event ended the stream
    assert text == sent  # nothing after the cut reached the client
    assert h.upstream.count(door.rescuer) == 0  # no second target was asked
    call = record(h)
    assert call.outcome == "failed"
    assert not any(a.continuation for a in call.attempts)
    assert [a.target.split("/")[1] for a in call.attempts] == [door.cut]


@pytest.mark.parametrize("door", DOOR_CASES.values(), ids=DOOR_CASES.keys())
def test_a_cut_after_a_tool_call_began_is_never_rescued(harness: Harness, door: Door) -> None:
    harness.configure(door.config)
    harness.upstream.script(door.cut, DropAfter(2, content=SENT, tool_call=True))
    harness.upstream.script(door.rescuer, Reply(WHOLE, chunks=4))
    text, failed = door.read(harness)
    assert_not_rescued(harness, door, text, failed, SENT)


@pytest.mark.parametrize("door", DOOR_CASES.values(), ids=DOOR_CASES.keys())
def test_a_cut_inside_reasoning_before_any_text_is_not_rescued(
    harness: Harness, door: Door
) -> None:
    """The client already has the reasoning (the commit point is its first delta): a
    restart elsewhere could not continue it, only follow it with another model's."""
    harness.configure(door.config)
    harness.upstream.script(door.cut, DropAfter(0, content="", reasoning="Let me think"))
    harness.upstream.script(door.rescuer, Reply(WHOLE, chunks=4, reasoning="Hmm"))
    text, failed = door.read(harness)
    assert_not_rescued(harness, door, text, failed, "")


@pytest.mark.parametrize("door", DOOR_CASES.values(), ids=DOOR_CASES.keys())
def test_a_cut_in_the_text_after_reasoning_is_rescued(harness: Harness, door: Door) -> None:
    """Reasoning, then text, then the cut: a cut in the text. The restart's own
    reasoning is not relayed (the client is past reasoning): only its surplus text."""
    harness.configure(door.config)
    harness.upstream.script(door.cut, DropAfter(2, content=SENT, reasoning="Let me think"))
    harness.upstream.script(door.rescuer, Reply(WHOLE, chunks=5, reasoning="Other thoughts"))
    text, failed = door.read(harness)
    assert not failed and text == WHOLE
    call = record(harness)
    assert call.outcome == "ok"
    assert [a.continuation for a in call.attempts] == [False, True]


# -- a continuation cut in turn -------------------------------------------------------------
THIRD = {  # each door's second target's line, and a third target after it
    "chat": ("{provider: p2, model: b}", "p2", "c"),
    "messages-pass-through": (
        "{provider: claude, model: a2, capabilities: {prefill: false}}",
        "claude",
        "a3",
    ),
    "messages-translated": ("{provider: chat, model: c2}", "chat", "c3"),
    "responses-pass-through": (
        "{provider: resp, model: r2, capabilities: {prefill: true}}",
        "resp",
        "r3",
    ),
    "responses-translated": ("{provider: chat, model: c2}", "chat", "c3"),
}
FURTHER = "The answer is forty-two,"  # what the first continuation gets to before its cut


def with_third(name: str) -> tuple[Door, str]:
    door = DOOR_CASES[name]
    line, provider, model = THIRD[name]
    # an Anthropic target takes a prefill unless it declares not to (issue 41): the third
    # restarts too, as the second does
    extra = ", capabilities: {prefill: false}" if provider == "claude" else ""
    config = door.config.replace(
        line, f"{line}\n      - {{provider: {provider}, model: {model}{extra}}}"
    )
    assert config != door.config
    return Door(config, door.cut, door.rescuer, door.read), model


@pytest.mark.parametrize("name", DOOR_CASES)
def test_a_continuation_cut_in_turn_goes_on_at_the_next_target(harness: Harness, name: str) -> None:
    from asgiref.sync import async_to_sync

    door, third = with_third(name)
    harness.configure(door.config)
    harness.upstream.script(door.cut, DropAfter(2, content=SENT))
    harness.upstream.script(door.rescuer, DropAfter(3, content=FURTHER))  # cut after more
    harness.upstream.script(third, Reply(WHOLE, chunks=7))
    text, failed = door.read(harness)
    assert not failed and text == WHOLE  # each restart reproduced what the client had
    call = record(harness)
    assert call.outcome == "ok"
    assert [a.continuation for a in call.attempts] == [False, True, True]
    assert call.trail().endswith(
        f"/{door.rescuer}:continuation,{call.attempts[2].target}:continuation"
    )
    cut_again = call.attempts[1].target
    snapshot = async_to_sync(harness.runtime.store.snapshot)([cut_again], [cut_again.split("/")[0]])  # type: ignore[attr-defined]
    assert snapshot.targets[cut_again].last_code == "TRANSPORT"  # it cut a stream: it paid


def test_when_the_chain_is_spent_a_second_cut_ends_in_the_error_event(harness: Harness) -> None:
    door = DOOR_CASES["chat"]
    harness.configure(door.config)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", DropAfter(3, content=FURTHER))
    text, failed = door.read(harness)
    assert failed and text == FURTHER  # what reached the client, and nothing spliced
    call = record(harness)
    assert call.outcome == "failed"
    assert [a.continuation for a in call.attempts] == [False, True]


def test_a_continuation_that_begins_a_tool_call_is_not_continued_again(
    harness: Harness,
) -> None:
    door, third = with_third("chat")
    harness.configure(door.config)
    harness.upstream.script("a", DropAfter(2, content=SENT))
    harness.upstream.script("b", DropAfter(3, content=FURTHER, tool_call=True))
    harness.upstream.script(third, Reply(WHOLE, chunks=7))
    text, failed = door.read(harness)
    assert failed and text == FURTHER
    assert harness.upstream.count(third) == 0
