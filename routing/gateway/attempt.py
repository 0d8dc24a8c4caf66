"""One upstream attempt: send, then read until the group's commit point.

An attempt ends in one of two ways before its commit point: a classified ``Failure``
(raised as ``UpstreamFailure``, so the call may retry or switch invisibly) or an
``Answer`` — the held-back prefix plus, for streams, a reader for the rest. After the
commit point the reader keeps its timeouts, and a later failure is the relay's to surface.

Timeouts per attempt (SPEC §3.8, docs/outages.md): connect (the pooled client), headers
(a stream's send → response headers), first token (send → first content/reasoning/
tool-call delta for a stream, the idle timeout not applying before it; send → response
headers for a JSON call, whose headers come with its whole answer), idle (between chunks
after the first content), total (whole attempt, also capped by the call's deadline).

Deadlines are instants on the ``clock`` the call passes in (the runtime's ``monotonic``);
the loop's timers get what is left until them, so a test's clock and the loop's may differ;
a clock with a ``call_later`` of its own (a test's virtual clock) sets them instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from routing.engine.failures import Failure, FailureCode, classify_error_object
from routing.engine.rescue import Partial
from routing.gateway.continuity import ServedTurn
from routing.gateway.deadline import ReadDeadline
from routing.gateway.replies import sse
from routing.platforms.base import StreamReader
from routing.protocols import Protocol, responses
from routing.protocols.canonical import OPAQUE
from routing.protocols.legs import (
    Decoder,
    Item,
    completion_for_door,
    completion_to_canonical,
    decoder_for,
    frame_for,
    stream_error,
)
from routing.protocols.naming import Renamer, rename_answer, rename_event, renamed
from routing.protocols.responses.tools import ToolNames
from routing.upstream.openai import OpenAIClient, Timeouts, UpstreamFailure, UpstreamResponse
from routing.upstream.sse import DONE, PlainDeltas, SSEParser

log = logging.getLogger("switchyard.gateway")

CONTENT_FIELDS = (
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "function_call",
    "refusal",
    OPAQUE,
)


def _usage_only(chunk: Mapping[str, Any]) -> bool:
    """A chunk that carries usage and no choice: the client gets one (the first)."""
    return bool(chunk.get("usage")) and not chunk.get("choices")


def has_content(chunk: Mapping[str, Any]) -> bool:
    """True for a chunk (or completion) carrying content, reasoning or a tool call."""
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        part = choice.get("delta") or choice.get("message") or {}
        if isinstance(part, dict) and any(part.get(name) for name in CONTENT_FIELDS):
            return True
    return False


class EventReader:
    """Parsed ``data:`` payloads of one upstream stream, each network read bounded by its
    deadline. ``next_batch`` returns every item one read completed, so the relay can send
    them on in one write; ``next`` hands them out one at a time (before the commit point).

    An item is ``(payload, event, canonical chunks)``. A chat upstream's chunk is its own
    canonical chunk; the other kinds' events go through their ``Decoder``, whose terminal
    event (``message_stop``, ``response.completed``) must arrive: a body that ends before
    it is a cut (``TRANSPORT``), never a clean end.

    After the commit point the chat relay (chat upstream, chat door) and the pass-through
    relays (a Messages or Responses upstream behind its own door) read with ``next_sse``
    instead: the bytes to write for one network read, with no item built per chunk. Each
    chunk is still parsed once: continuity fingerprints every content delta
    (``ServedTurn.feed``), and the error, usage and finish-reason checks (the decoder's
    end and usage, for the other kinds) read the same dict; a parse costs less than the
    item, framing and join it replaces."""

    def __init__(
        self,
        response: UpstreamResponse,
        timeouts: Timeouts,
        *,
        started: float,
        deadline: float,
        kind: Protocol = Protocol.CHAT,
        scrub: Callable[[Failure], Failure] = lambda failure: failure,
        clock: Callable[[], float] = time.monotonic,
        name: str | None = None,
        body: StreamReader | None = None,
    ) -> None:
        """``started`` and ``deadline`` are instants on ``clock``; ``name``: the model
        every event names (``routing.protocols.naming``), None: as sent; ``body``: the
        stream as protocol bytes (``OpenAIClient.reader``), default as sent."""
        self._scrub = scrub  # an in-stream error event is upstream text
        self._renamer = None if name is None else Renamer(name)
        self._clock = clock
        self._response = response
        self._kind = kind
        self._decoder: Decoder | None = decoder_for(kind)
        self._frame = None if self._decoder is None else frame_for(kind)
        self._body: StreamReader = response.reader() if body is None else body
        self._watch = ReadDeadline(clock)
        self._parser = SSEParser()
        self._plain = PlainDeltas()
        self._ready: list[Item] = []  # a few per read: a deque's block is 700 bytes a stream
        self._framing = False  # next_sse reads: payloads go to _frames, not _ready
        self._frames: list[bytes] = []  # the payloads of the latest read to pass on
        self._events: list[tuple[bytes, dict[str, Any]]] = []  # the same, decoded kinds
        self._verbatim: bytes | None = None  # that read itself, when it is exactly them
        self._usage_chunk: dict[str, Any] | None = None  # the usage-only chunk relayed
        self._finished = False
        self._failure: Failure | None = None  # raised once the chunks before it are handed out
        self._total_deadline = min(started + timeouts.total_s, deadline)
        self._first_token_deadline = started + timeouts.first_token_s
        self._idle_s = timeouts.idle_s
        self.got_content = False
        self.malformed = 0
        self._last_malformed = False  # the latest line could not be parsed
        self._seen: set[int] = set()  # choice indices that appeared
        self._done: set[int] = set()  # choice indices that carried a finish_reason
        self.usage: dict[str, Any] | None = None
        self.started = started
        self.first_content_at: float | None = None
        self.turn = ServedTurn()  # the assistant turn being streamed, for provenance
        self.partial: Partial | None = None  # the text so far, when the group may rescue

    @property
    def decoder(self) -> Decoder | None:
        """The decoder of a Messages or Responses stream (its id, end and usage so far)."""
        return self._decoder

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_content_at is None else self.first_content_at - self.started

    async def next(self) -> Item | None:
        """The next JSON chunk, or None at ``[DONE]`` or a clean end of the body."""
        while not self._ready:
            if self._failure is not None:
                raise UpstreamFailure(self._failure)
            if self._finished:
                return None
            await self._read()
        return self._ready.pop(0)

    async def next_batch(self) -> list[Item] | None:
        """Every chunk available now (at least one), or None at the end."""
        while not self._ready:
            if self._failure is not None:
                raise UpstreamFailure(self._failure)
            if self._finished:
                return None
            await self._read()
        batch = list(self._ready)
        self._ready.clear()
        return batch

    async def next_sse(self) -> bytes | None:
        """A committed relay's next write, for a chat stream behind the chat door or a
        Messages or Responses stream behind its own: every event one network read completed,
        framed as the upstream framed it, or None at the end. A read made only of whole
        events, all passed on, is sent as it came (no re-framing); a chat usage-only chunk
        after the first is dropped, so the client gets usage once. Raises ``UpstreamFailure``
        as ``next_batch`` does, after the events that came before the failure."""
        frame = self._frame
        if self._ready:  # the rest of the read that reached the commit point
            first, items = self._usage_chunk, list(self._ready)
            self._ready.clear()
            if frame is not None:
                return b"".join(frame(payload, event) for payload, event, _ in items)
            return b"".join(
                sse(payload)
                for payload, chunk, _ in items
                if chunk is first or not _usage_only(chunk)
            )
        self._framing = True
        frames, events = self._frames, self._events
        while not (frames or events):
            if self._failure is not None:
                raise UpstreamFailure(self._failure)
            if self._finished:
                return None
            await self._read()
        if self._verbatim is not None:
            out = self._verbatim
        elif frame is not None:
            out = b"".join([frame(payload, event) for payload, event in events])
        else:
            out = b"".join([sse(payload) for payload in frames])
        if frame is None and self._renamer is not None:
            out = self._renamer.write(out)  # the chunks it did not parse too
        frames.clear()
        events.clear()
        self._verbatim = None
        return out

    async def _read(self) -> None:
        """One network read, parsed. Raises ``UpstreamFailure`` on timeout, cut or an
        in-stream error event (after queueing the chunks that came before it)."""
        if self.got_content:
            deadline, phase = self._clock() + self._idle_s, "idle"
        else:  # a model thinking before its first token may send nothing for minutes
            deadline, phase = self._first_token_deadline, "first-token"
        if deadline >= self._total_deadline:
            deadline, phase = self._total_deadline, "total"
        watch = self._watch
        watch.start(deadline)
        try:
            data = await self._body.read()
        except asyncio.CancelledError:
            if watch.timed_out():
                raise UpstreamFailure(Failure(FailureCode.TIMEOUT, f"{phase} timeout")) from None
            raise
        except TimeoutError as exc:  # a read's own timeout, should one come through
            raise UpstreamFailure(Failure(FailureCode.TIMEOUT, f"{phase} timeout")) from exc
        except UpstreamFailure as exc:
            if exc.failure.code is not FailureCode.TRANSPORT:  # a failure frame: upstream text
                raise UpstreamFailure(self._scrub(exc.failure), exc.usage) from exc
            # A reset ends the body as a clean close does (SPEC §3.5): the answer decides,
            # not the connection: complete is a clean end, anything else the same cut.
            self._accept(self._parser.close())
            self._end_of_body()
            return
        finally:
            watch.stop()
        if not data:  # the end of the body
            self._accept(self._parser.close())
            self._end_of_body()
            return
        self._accept(self._parser.feed(data), data)

    def _answer_complete(self) -> bool:
        """Every choice that appeared carried a finish_reason, and the last line parsed;
        for a decoded kind, its final event (``message_stop``, ``response.completed``) came."""
        if self._decoder is not None:
            return self._decoder.finished
        return bool(self._done) and self._seen <= self._done and not self._last_malformed

    def _end_of_body(self) -> None:
        """The body ended without ``[DONE]``: a clean end only for a complete answer
        (SPEC §3.5); anything else is a cut, whatever the connection said."""
        if self._finished:  # [DONE] or an error event came first
            return
        self._finished = True
        if not self._answer_complete():
            what = "a finish reason" if self._decoder is None else "its final event"
            self._failure = Failure(FailureCode.TRANSPORT, f"stream ended before {what}")

    def _accept(self, payloads: list[bytes], read: bytes | None = None) -> None:
        """Queue the chunks of one read (``read``: its bytes, kept for ``next_sse`` when
        they are exactly the chunks passed on)."""
        if self._decoder is not None:
            self._accept_decoded(payloads, self._decoder, read)
            return
        passed, framing, seen, done = 0, self._framing, self._seen, self._done
        renamer, redone = self._renamer, False
        # Past the commit point most chunks are one content delta: scanned, not parsed
        # (``PlainDeltas``); what the parse below would learn from such a chunk is
        # exactly choice 0 seen and its content for continuity. A call that may be rescued
        # keeps its partial text from the parse, so it parses every chunk.
        scan = (
            framing
            and self.got_content
            and self.turn.response_id is not None
            and self.partial is None
        )
        for payload in payloads:
            if scan and (raw := self._plain.content(payload)) is not None:
                try:
                    if not payload.isascii():
                        payload.decode()  # a parser would refuse invalid UTF-8
                    self.turn.feed_content(raw)
                except ValueError:  # not UTF-8, or a bad escape: the parse decides
                    pass
                else:
                    self._last_malformed = False
                    seen.add(0)
                    self._frames.append(payload)
                    passed += 1
                    continue
            if payload == DONE:
                self._finished = True
                break
            chunk = self._parsed(payload)
            if chunk is None:
                continue
            error = chunk.get("error")
            if error:
                self._finished = True
                self._failure = self._scrub(classify_error_object(error, None))
                break
            if renamer is not None:  # a write renames the members it knows (``next_sse``)
                named = renamer.chunk(payload, chunk, deferred=framing)
                if named is not None and named is not payload:
                    payload, redone = named, True
            usage = chunk.get("usage")
            if usage:
                self.usage = usage
            choices = chunk.get("choices")
            for choice in choices or ():
                if isinstance(choice, dict):
                    index = choice.get("index", 0)
                    index = index if isinstance(index, int) else 0
                    seen.add(index)
                    if choice.get("finish_reason"):
                        done.add(index)
            if not self.got_content and has_content(chunk):
                self.got_content = True
                self.first_content_at = self._clock()
            self.turn.feed(chunk)
            if self.partial is not None:
                self.partial.feed(chunk)
            if usage and not choices:  # usage-only: the client gets the first one
                if self._usage_chunk is not None and framing:
                    continue
                self._usage_chunk = self._usage_chunk or chunk
            if framing:
                self._frames.append(payload)
                passed += 1
            else:
                self._ready.append((payload, chunk, (chunk,)))
        if read is not None and passed == len(payloads) and self._parser.verbatim and not redone:
            self._verbatim = read

    def _parsed(self, payload: bytes) -> dict[str, Any] | None:
        """A chat chunk's object, or None for a malformed line (counted and skipped)."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.malformed += 1
            self._last_malformed = True
            log.warning("skipped a malformed stream line (%d bytes)", len(payload))
            return None
        if not isinstance(chunk, dict):
            self.malformed += 1
            self._last_malformed = True
            return None
        self._last_malformed = False
        return chunk

    def _accept_decoded(
        self, payloads: list[bytes], decoder: Decoder, read: bytes | None = None
    ) -> None:
        passed, framing = 0, self._framing
        name = None if self._renamer is None else self._renamer.name
        redone = False
        for payload in payloads:
            if self._finished and decoder.finished:
                break
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                self.malformed += 1
                log.warning("skipped a malformed stream line (%d bytes)", len(payload))
                continue
            if not isinstance(event, dict):
                self.malformed += 1
                continue
            error = stream_error(self._kind, event)
            if error:
                self._finished = True
                self._failure = self._scrub(classify_error_object(error, None))
                break
            if name is not None and (named := rename_event(payload, event, name)) is not None:
                payload, redone = named, True  # only the events that name another model
            chunks = decoder.decode(event)
            for canonical in chunks:
                self.turn.feed(canonical)
                if self.partial is not None:
                    self.partial.feed(canonical)
            if not self.got_content and any(has_content(c) for c in chunks):
                self.got_content = True
                self.first_content_at = self._clock()
            if framing:
                self._events.append((payload, event))
                passed += 1
            else:
                self._ready.append((payload, event, tuple(chunks)))
            if decoder.finished:
                self.usage = decoder.usage
                self._finished = True
                break
        if read is not None and passed == len(payloads) and self._parser.named and not redone:
            self._verbatim = read

    def release_request(self) -> None:
        """The stream is committed: its request is never sent again (see
        ``UpstreamResponse.release_request``)."""
        self._response.release_request()

    async def aclose(self) -> None:
        self._watch.cancel()
        await self._response.aclose()


@dataclass(slots=True)
class Answer:
    """A committed answer: what to send first, and for live streams the rest."""

    prefix: list[bytes]  # SSE payloads (streams) or the single JSON body (non-stream)
    reader: EventReader | None = None  # live stream continuation; None when complete
    items: list[Item] = field(default_factory=list)  # the held-back stream items
    usage: dict[str, Any] | None = None
    ttft_s: float | None = None  # send → first content, for latency-aware routing
    extra: dict[str, Any] = field(default_factory=dict)
    turn: ServedTurn | None = None  # the assistant turn it carries, for provenance


async def run_attempt(
    client: OpenAIClient,
    body: bytes,
    *,
    stream: bool,
    commit: str,
    model: str,
    deadline: float,
    name: str | None = None,
    door: Protocol = Protocol.CHAT,
    kind: Protocol = Protocol.CHAT,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    names: ToolNames | None = None,
    partial: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Answer:
    """Carry one attempt to its commit point. Raises ``UpstreamFailure`` before it.
    ``partial``: keep the streamed text (``reader.partial``) for a mid-stream rescue.

    ``endpoint`` ``"embeddings"`` posts to ``<base>/embeddings`` (JSON only; an answer
    without vectors is ``EMPTY_RESPONSE``).

    ``door`` is the protocol the client speaks, ``kind`` the target's: a JSON answer is
    returned in the door's shape; a stream's items are left for the door's relay. Either
    way the answer names ``name`` (default ``model``, the target's model, which also goes
    into a URL that names it): the name the client asked for (SPEC §3, step 11).

    ``deadline`` is the call's, an instant on ``clock`` (the runtime's ``monotonic``)."""
    started = clock()
    timeouts = client.timeouts
    name = model if name is None else name
    if started >= deadline:
        raise UpstreamFailure(Failure(FailureCode.TIMEOUT, "call deadline reached"))
    path = f"/{endpoint}" if endpoint else None
    send = client.send(body, path=path, headers=headers, model=model, stream=stream)
    headers_at, phase = _headers_deadline(timeouts, started, deadline, stream=stream)
    response = await _headers_in_time(send, headers_at, phase, clock)
    if not stream:
        return await _read_completion(
            response,
            timeouts,
            started=started,
            deadline=deadline,
            model=name,
            door=door,
            kind=kind,
            vectors=endpoint == "embeddings",
            scrub=client.upstream_failure,
            names=names,
            clock=clock,
        )
    reader = EventReader(
        response,
        timeouts,
        started=started,
        deadline=deadline,
        kind=kind,
        scrub=client.upstream_failure,
        clock=clock,
        name=name,
        body=client.reader(response),
    )
    if partial:
        reader.partial = Partial()
        if isinstance(reader.decoder, responses.StreamDecoder):
            reader.decoder.keep = True  # a Responses pass-through is continued from it
    try:
        return await _read_to_commit(reader, commit=commit)
    except UpstreamFailure as exc:
        exc.usage = exc.usage or reader.usage  # reported before it failed: still paid for
        await reader.aclose()
        raise
    except BaseException:
        await reader.aclose()
        raise


def _headers_deadline(
    timeouts: Timeouts, started: float, deadline: float, *, stream: bool
) -> tuple[float, str]:
    """When the response headers must have come, and the timeout that says so. A stream's
    come before the model thinks (``headers_s``: an upstream that accepted the connection
    and sends nothing is dead); a JSON call's come with its whole answer, so
    ``first_token_s`` bounds them (SPEC §3.8, docs/outages.md)."""
    headers_at, phase = started + timeouts.first_token_s, "first-token"
    if stream and timeouts.headers_s < timeouts.first_token_s:
        headers_at, phase = started + timeouts.headers_s, "headers"
    total_at = min(deadline, started + timeouts.total_s)
    if headers_at >= total_at:
        return total_at, "total"
    return headers_at, phase


async def _headers_in_time(
    send: Awaitable[UpstreamResponse], deadline: float, phase: str, clock: Callable[[], float]
) -> UpstreamResponse:
    """The response headers by ``deadline`` (an instant on ``clock``), or a TIMEOUT failure
    naming the ``phase`` that came first."""
    watch = ReadDeadline(clock)
    try:
        return await watch.run(send, deadline)
    except TimeoutError as exc:
        raise UpstreamFailure(
            Failure(FailureCode.TIMEOUT, f"{phase} timeout: no response headers")
        ) from exc
    finally:
        watch.cancel()


async def _read_to_commit(reader: EventReader, *, commit: str) -> Answer:
    """Hold back role, usage and everything else until first content (or the end, for
    ``complete``). An end without content is ``EMPTY_RESPONSE``."""
    held: list[bytes] = []
    items: list[Item] = []
    while True:
        item = await reader.next()
        if item is None:
            if reader.malformed and not reader.got_content:
                raise UpstreamFailure(
                    Failure(FailureCode.TRANSPORT, "upstream stream could not be parsed")
                )
            if not reader.got_content:
                raise UpstreamFailure(
                    Failure(FailureCode.EMPTY_RESPONSE, "stream finished without content")
                )
            await reader.aclose()
            return Answer(
                prefix=held,
                reader=None,
                items=items,
                usage=reader.usage,
                ttft_s=reader.ttft_s,
                turn=reader.turn,
            )
        held.append(item[0])
        items.append(item)
        if reader.got_content and commit != "complete":
            return Answer(
                prefix=held,
                reader=reader,
                items=items,
                usage=reader.usage,
                ttft_s=reader.ttft_s,
                turn=reader.turn,
            )


async def _read_completion(
    response: UpstreamResponse,
    timeouts: Timeouts,
    *,
    started: float,
    deadline: float,
    model: str,
    door: Protocol = Protocol.CHAT,
    kind: Protocol = Protocol.CHAT,
    vectors: bool = False,
    scrub: Callable[[Failure], Failure] = lambda failure: failure,
    names: ToolNames | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Answer:
    watch = ReadDeadline(clock)
    try:
        raw = await watch.run(response.read(), min(deadline, started + timeouts.total_s))
    except TimeoutError as exc:
        raise UpstreamFailure(Failure(FailureCode.TIMEOUT, "total timeout")) from exc
    finally:
        watch.cancel()
        await response.aclose()
    try:
        completion = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamFailure(
            Failure(FailureCode.TRANSPORT, "upstream body is not valid JSON")
        ) from exc
    if not isinstance(completion, dict):
        raise UpstreamFailure(Failure(FailureCode.TRANSPORT, "upstream body is not a JSON object"))
    if completion.get("error"):
        raise UpstreamFailure(
            scrub(classify_error_object(completion["error"], response.status_code))
        )
    if vectors:
        if not completion.get("data"):
            raise UpstreamFailure(Failure(FailureCode.EMPTY_RESPONSE, "no embeddings in answer"))
        if completion.get("model") not in (None, model):
            raw = renamed(raw, completion, model)
        ttft = clock() - started
        return Answer(prefix=[raw], reader=None, usage=completion.get("usage"), ttft_s=ttft)
    canonical = completion if kind is Protocol.CHAT else completion_to_canonical(kind, completion)
    if not has_content(canonical):
        raise UpstreamFailure(
            Failure(FailureCode.EMPTY_RESPONSE, "completion has no content"),
            usage=canonical.get("usage"),
        )
    if door is not kind:
        canonical["model"] = model
        raw = completion_for_door(door, canonical, names)
    elif (named := rename_answer(raw, completion, model)) is not None:
        raw = named  # a pass-through: its name alone
    ttft = clock() - started
    return Answer(
        prefix=[raw],
        reader=None,
        usage=canonical.get("usage"),
        ttft_s=ttft,
        turn=ServedTurn.from_completion(canonical),
    )
