"""Carry out a mid-stream rescue (SPEC §16; the rules are ``routing.engine.rescue``).

A committed stream was cut or stalled while producing text, in a group with ``resume:
continuation``: ask the next eligible target for the rest, and relay only what the client
does not have yet. :func:`continue_elsewhere` yields the bytes to write after what the
client already got and reports how it ended in :class:`Rescue`; a rescue that cannot
finish ends with the door's error event, exactly as an unrescued stream would. A
continuation cut in turn is continued by the next target of the chain, each target once.
A rescued stream names its trail, continuations included, in an SSE comment before its
end (:func:`trail_note`): the ``x-switchyard-trail`` header went out before the rescue.

The continuation is read as canonical chunks (whatever its target's kind) and written in
the door's framing by a :class:`Sink`: chat chunks for the chat door, the broken relay's
own encoder when it was translating, for a Messages pass-through an encoder primed with
the text block the client has open, and for a Responses pass-through an encoder primed
with the response the client is reading (its id, ``sequence_number``, finished items and
open message; ``responses.continuing``). A Responses target always restarts: Responses
has no assistant prefill.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from routing.engine.failures import Failure, FailureCode
from routing.engine.plan import CommitPoint
from routing.engine.rescue import (
    Match,
    Partial,
    Reproduction,
    RescueMode,
    may_rescue,
    rejects_prefill,
    rescue_mode,
)
from routing.gateway.attempt import Answer, EventReader, run_attempt
from routing.gateway.replies import SSE_DONE, sse, sse_error
from routing.gateway.walk import pick
from routing.protocols import Protocol, messages, responses
from routing.protocols.legs import Item, PassThrough, Relay, translate_body
from routing.protocols.registry import PROTOCOLS
from routing.protocols.responses.tools import ToolNames
from routing.upstream.openai import UpstreamFailure

if TYPE_CHECKING:
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.state import CallState
    from routing.gateway.table import TargetSpec

Chunk = dict[str, Any]


@dataclass(slots=True)
class Sink:
    """Writes continuation chunks in the door's framing."""

    encode: Callable[[list[Chunk]], bytes]
    end: Callable[[], bytes]
    error: Callable[[str, str], bytes]


def chat_sink(*, include_usage: bool) -> Sink:
    def encode(chunks: list[Chunk]) -> bytes:
        return b"".join(sse(orjson.dumps(c)) for c in chunks if c.get("choices") or include_usage)

    return Sink(encode, lambda: SSE_DONE, lambda message, code: sse_error(message, code=code))


def sink_for(
    door: Protocol,
    relay: Relay | None,
    reader: EventReader,
    body: Chunk,
    names: ToolNames | None = None,
) -> Sink | None:
    """The sink that continues what ``relay`` (None: the chat relay) was writing, or None
    when this door and kind cannot be continued."""
    if PROTOCOLS[door].canonical:  # the chat door
        options = body.get("stream_options")
        return chat_sink(
            include_usage=isinstance(options, dict) and bool(options.get("include_usage"))
        )
    if relay is None:
        return None
    if isinstance(relay, PassThrough):
        decoder = reader.decoder
        if door is Protocol.RESPONSES and isinstance(decoder, responses.StreamDecoder):
            # The same response goes on: its id, numbering, items and open text part.
            primed = responses.continuing(decoder, names)
            if primed is None:
                return None
            return Sink(primed.encode, primed.end, primed.error)
        if door is not Protocol.MESSAGES or not isinstance(decoder, messages.StreamDecoder):
            return None
        encoder = messages.StreamEncoder(open_text_block=max(decoder.block_index, 0))
        return Sink(
            encoder.encode,
            encoder.end,
            lambda message, code: relay.error(message, code=code),
        )
    return Sink(
        lambda chunks: relay.encode([(b"", {}, tuple(chunks))]),
        relay.end,
        lambda message, code: relay.error(message, code=code),
    )


log = logging.getLogger("switchyard.gateway")


@dataclass(slots=True)
class Rescue:
    """How a rescue went: ``ok`` once the rest reached the client and the stream ended."""

    ok: bool = False
    target: str | None = None
    mode: RescueMode | None = None
    usage: dict[str, Any] | None = None
    failure: Failure | None = None
    broke: bool = False  # the failure is the continuation's own cut or stall
    tried: list[str] = field(default_factory=list)
    attempt: AttemptRecord | None = None  # the continuation's (its usage set at the end)


def _with_prefill(body: dict[str, Any], text: str) -> dict[str, Any]:
    messages = list(body.get("messages") or ())
    return {**body, "messages": [*messages, {"role": "assistant", "content": text}]}


def _content(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return None
    content = delta.get("content")
    return content if isinstance(content, str) else ""


def _with_content(chunk: dict[str, Any], text: str) -> dict[str, Any]:
    choice = dict(chunk["choices"][0])
    choice["delta"] = {**choice["delta"], "content": text}
    return {**chunk, "choices": [choice, *chunk["choices"][1:]]}


async def _outbound(
    call: CallState, target: TargetSpec, kind: Protocol, prefill: str | None
) -> bytes:
    """The original request for ``target``, with ``prefill`` as a last assistant message."""
    if kind is call.door and call.door_continuity is not None:  # a Messages pass-through
        outbound, _ = await call.door_continuity.outbound(target)
        if prefill is not None:
            outbound = _with_prefill(outbound, prefill)
        return orjson.dumps(outbound)
    outbound, rewrites = await call.continuity.outbound(target)
    if prefill is None:
        body, _ = call.body_for(kind, target, outbound, rewrites)
        return body
    outbound = _with_prefill(outbound, prefill)
    body, _ = translate_body(kind, outbound, target.model)  # chat: as is, model rewritten
    return body


def trail_note(record: CallRecord) -> bytes:
    """An SSE comment naming the call's trail with its continuations: the
    ``x-switchyard-trail`` header went out at the commit point, before any rescue. Every
    SSE client ignores a line that starts with ``:`` (the SSE specification), so only a
    rescued stream carries it, right before its end or its error event."""
    trail = record.trail().replace("\r", " ").replace("\n", " ")
    return b": x-switchyard-trail: " + trail.encode() + b"\n\n"


async def continue_elsewhere(
    call: CallState, failed: TargetSpec, partial: Partial, sink: Sink, rescue: Rescue
) -> AsyncIterator[bytes]:
    """Continue a cut stream on the next eligible target (see the module docstring).

    A continuation that is cut in turn, while still producing text, is continued by the
    next target of the chain, from everything the client then has (its text grows in
    ``partial``): one target after another, never one twice, so the chain bounds it. It
    pays for the cut as the first target did. The stream ends with the door's end or
    error event, after :func:`trail_note`; when no target answered at all, the caller
    writes the error event of the first cut."""
    call.failed.add(failed.key)
    source = failed
    while True:
        answered = await _answer(call, partial, rescue)
        if answered is None:
            break
        target, answer, mode = answered
        log.warning(
            "rescuing call=%s group=%s from=%s to=%s mode=%s after %d characters",
            call.call_id,
            call.group.name,
            source.key,
            target.key,
            mode.value,
            len(partial.text),
        )
        async for out in _relay_rest(answer.items, answer.reader, partial, mode, sink, rescue):
            yield out
        failure = rescue.failure
        if rescue.ok or failure is None or not rescue.broke:
            break
        log.warning(
            "continuation failed call=%s group=%s target=%s code=%s: %s",
            call.call_id,
            call.group.name,
            target.key,
            failure.code.value,
            failure.message,
        )
        await call.charge(target, failure, probe=False)  # it cut a stream: it pays
        call.failed.add(target.key)
        if not may_rescue(
            call.group.resume,
            failure.code,
            text=partial.text,
            tool_began=partial.tool_began,
            in_reasoning=partial.in_reasoning,
        ):
            break
        source = target  # cut in turn while producing text: the next target goes on
    if rescue.tried:
        yield trail_note(call.record)
    if rescue.ok:
        yield sink.end()
    elif rescue.target is not None and rescue.failure is not None:
        yield sink.error(rescue.failure.client_message, rescue.failure.code.value)


async def _answer(
    call: CallState, partial: Partial, rescue: Rescue
) -> tuple[TargetSpec, Answer, RescueMode] | None:
    """The next eligible target that answers the request for the rest (a prefill of
    ``partial``, or a restart), or None when none is left."""
    runtime = call.runtime
    while True:
        picked = await pick(call, 0)  # no ticket: the chain's order
        if picked is None:
            return None
        target, probe = picked
        protocol = target.provider.protocol
        kind = protocol.kind
        mode = rescue_mode(
            call.group.resume,
            prefill=target.prefill if protocol.prefill else False,
            trailing_assistant=kind is Protocol.MESSAGES,
            learned_no_prefill=target.key in runtime.no_prefill,
        )
        if mode is None:  # takes no prefill, and no restart was asked for: pass it over
            call.failed.add(target.key)
            if probe:
                await runtime.store.release_probe(target.key, runtime.clock())
            continue
        body = await _outbound(
            call, target, kind, partial.text if mode is RescueMode.PREFILL else None
        )
        started = runtime.monotonic()
        rescue.tried.append(target.key)
        try:
            answer = await run_attempt(
                runtime.client_for(target.provider),
                body,
                stream=True,
                commit=CommitPoint.FIRST_CONTENT,
                model=target.model,
                name=call.asked_for,
                deadline=call.deadline,
                door=call.door,
                kind=kind,
                headers=call.protocol_headers if kind is call.door else None,
                names=call.prepared.tool_names,
                clock=runtime.monotonic,
            )
        except UpstreamFailure as exc:
            f = exc.failure
            record = call.attempt(target, 1, started, ok=False, probe=probe, failure=f)
            record.continuation, record.usage = True, exc.usage
            if mode is RescueMode.PREFILL and rejects_prefill(f.code, f.status):
                # Learned: it does not take a prefill. The request was at fault, not the
                # target: no health charge; the next round restarts there under
                # ``resume: restart``, else passes it over for the next eligible target.
                runtime.no_prefill.add(target.key)
                if probe:
                    await runtime.store.release_probe(target.key, runtime.clock())
                continue
            await call.charge(target, f, probe)
            call.failed.add(target.key)
            continue
        record = call.attempt(target, 1, started, ok=True, probe=probe)
        record.continuation = True
        rescue.target, rescue.mode, rescue.attempt = target.key, mode, record
        rescue.failure, rescue.broke = None, False
        # It answered: a probe's verdict, and health for everyone (as a commit records it).
        runtime.hub.publish_all(
            await runtime.store.record_success(target.key, runtime.clock(), None)
        )
        return target, answer, mode


def _rest(
    chunks: list[Chunk], reproduction: Reproduction | None, rescue: Rescue
) -> tuple[list[Chunk], Reproduction | None]:
    """The chunks the client does not have yet; ``reproduction`` None once it passed."""
    out: list[Chunk] = []
    for chunk in chunks:
        if reproduction is None or not chunk.get("choices"):
            out.append(chunk)
            continue
        verdict, surplus = reproduction.feed(_content(chunk) or "")
        if verdict is Match.DIVERGED:
            rescue.failure = Failure(
                FailureCode.TRANSPORT,
                "the stream was cut and a restart elsewhere diverged from the text already "
                "sent: not spliced",
            )
            return out, reproduction
        if verdict is Match.PASSED:
            reproduction = None
            if surplus or chunk["choices"][0].get("finish_reason"):
                out.append(_with_content(chunk, surplus))
    return out, reproduction


async def _relay_rest(
    items: list[Item],
    reader: EventReader | None,
    partial: Partial,
    mode: RescueMode,
    sink: Sink,
    rescue: Rescue,
) -> AsyncIterator[bytes]:
    """The continuation's text the client does not have yet (``partial`` grows by it).
    How it ended is in ``rescue``: ``ok``, or a ``failure``: a restart that diverged or
    ended before the cut, or the continuation itself broke (``broke``). The end or error
    event is the caller's to write."""
    reproduction = Reproduction(partial.text) if mode is RescueMode.RESTART else None
    try:
        batch: list[Item] | None = items
        while batch is not None:
            chunks = [c for _, _, canonical in batch for c in canonical]
            rest, reproduction = _rest(chunks, reproduction, rescue)
            for chunk in rest:
                partial.feed(chunk)
            out = sink.encode(rest) if rest else b""
            if out:
                yield out
            if rescue.failure is not None or reader is None:
                break
            try:
                batch = await reader.next_batch()
            except UpstreamFailure as exc:
                rescue.failure, rescue.broke = exc.failure, True
                return
        if rescue.failure is not None:
            return
        if reproduction is not None:  # the restart ended before reproducing the client's text
            rescue.failure = Failure(
                FailureCode.TRANSPORT, "a restart elsewhere ended before reaching the cut"
            )
            return
        rescue.ok = True
    finally:
        if reader is not None:
            rescue.usage = reader.usage
            if rescue.attempt is not None:
                rescue.attempt.usage = reader.usage
            await reader.aclose()
