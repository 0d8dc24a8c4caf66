"""A stream past its commit point: the relay from the upstream to the client.

The call's loop (``routing.gateway.call``) commits an attempt and hands its stream here
with the call's state (``routing.gateway.state.CallState``). The relay sends the
held-back prefix, then the live rest as each network read brings it, in the door's
:class:`Framing`: a chat stream behind the chat door is re-framed as SSE (:data:`CHAT`),
every other door/kind pair goes through its leg's encoder (:func:`leg_framing`,
``routing.protocols.legs``); one loop (:meth:`CommittedStream.relay`) writes both. Past
the commit point there is no retry and no switch: a failure is charged to the target and
ends the stream with the door's error event, never a fake clean end, unless the group
resumes it (SPEC §16; ``routing.gateway.rescue`` continues it elsewhere). However the
stream ends (done, failed, the client gone before or during it),
:meth:`CommittedStream._ended` closes the upstream, settles the usage and finishes the
call's record once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Protocol as Interface

import orjson

from routing.engine.failures import Failure, FailureCode
from routing.engine.rescue import may_rescue
from routing.gateway.attempt import Answer, EventReader
from routing.gateway.events import CallOutcome
from routing.gateway.replies import SSE_DONE, StreamReply, sse, sse_error
from routing.gateway.rescue import Rescue, continue_elsewhere, sink_for
from routing.protocols.legs import PassThrough, Relay, relay_for
from routing.upstream.openai import UpstreamFailure

if TYPE_CHECKING:
    from routing.gateway.state import CallState
    from routing.gateway.table import TargetSpec

log = logging.getLogger("switchyard.gateway")


class ErrorEvent(Interface):
    def __call__(self, message: str, *, code: str) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Framing:
    """How a committed stream is written in its door's framing: the held-back part, the
    event that ends it after a failure, its end. ``relay`` is the door's leg (None: a chat
    stream re-framed as SSE), which a rescue continues; ``ending`` names the error event
    in the log."""

    held: Callable[[Answer], bytes]
    error: ErrorEvent
    end: Callable[[], bytes]
    relay: Relay | None
    ending: str

    def writes(self, reader: EventReader) -> Callable[[], Awaitable[bytes | None]]:
        """The bytes of each next network read, None at the end: the upstream's own
        events for a chat stream or a pass-through; for a translating leg, its encoding
        of the items each read completed."""
        relay = self.relay
        if relay is None or isinstance(relay, PassThrough):
            return reader.next_sse

        async def translated() -> bytes | None:
            batch = await reader.next_batch()
            return None if batch is None else relay.encode(batch)

        return translated


def _chat_held(answer: Answer) -> bytes:
    return _framed_prefix(answer.prefix)


def _chat_end() -> bytes:
    return SSE_DONE


CHAT = Framing(_chat_held, sse_error, _chat_end, None, "an SSE error")


def leg_framing(relay: Relay) -> Framing:
    """A door/kind pair's leg: its encoder writes the held-back items and the rest."""
    return Framing(
        lambda answer: relay.encode(answer.items),
        relay.error,
        relay.end,
        relay,
        "the door's error event",
    )


def stream_reply(
    call: CallState, target: TargetSpec, answer: Answer, headers: dict[str, str]
) -> StreamReply:
    """The reply of a committed stream: the chat framing for a chat upstream behind the
    chat door, the door's leg otherwise. Unless the group may rescue it (a rescue sends
    the request again), the call lets its request go now."""
    stream = CommittedStream(call, target, answer)
    protocol = target.provider.protocol
    kind = protocol.kind
    if kind is call.door and protocol.canonical:  # chat to chat
        framing = CHAT
    else:
        reader = answer.reader
        framing = leg_framing(
            relay_for(
                call.door,
                kind,
                call.body,
                reader.decoder if reader else None,
                call.prepared.tool_names,
            )
        )
    if not call.rescuable:
        call.release_request(answer)
    return StreamReply(stream.relay(framing), headers=headers, abandon=stream.abandon)


class CommittedStream:
    """One committed stream of a call: its target, its answer, how it ended so far and,
    if it was cut and the group resumes, how the rescue went (None: not attempted)."""

    __slots__ = ("call", "target", "answer", "outcome", "error_code", "rescue")

    def __init__(self, call: CallState, target: TargetSpec, answer: Answer) -> None:
        self.call = call
        self.target = target
        self.answer = answer
        self.outcome = CallOutcome.OK
        self.error_code: str | None = None
        self.rescue: Rescue | None = None

    async def abandon(self) -> None:
        """The client left between the commit and the first write: the generator never
        started, so its ``finally`` never runs (``StreamReply.abandon``)."""
        self.outcome, self.error_code = CallOutcome.ABORTED, FailureCode.ABORTED.value
        await self._ended()

    async def relay(self, framing: Framing) -> AsyncIterator[bytes]:
        """Send the held-back prefix, then the live rest, one write per network read.
        After the commit point a failure is surfaced as the door's error event: no retry,
        no switch, never a fake clean end (unless a rescue continues it)."""
        answer = self.answer
        reader = answer.reader
        try:
            yield framing.held(answer)
            answer.prefix, answer.items = [], []  # sent: not held for the stream's life
            if reader is not None:
                writes = framing.writes(reader)
                while True:
                    try:
                        out = await writes()
                    except UpstreamFailure as exc:
                        failure = exc.failure
                        await self._failed(failure, framing.ending)
                        async for out in self._rescue(reader, failure, framing.relay):
                            yield out
                        if self._unrescued():
                            yield framing.error(failure.client_message, code=failure.code.value)
                        return
                    if out is None:
                        break
                    if out:  # everything one network read brought, in one write
                        yield out
                # Before the end: a client's next request must find this turn remembered.
                await self.call.continuity.remember(self.target, answer.turn)
            tail = framing.end()
            if tail:
                yield tail
        except (asyncio.CancelledError, GeneratorExit):
            self.outcome, self.error_code = CallOutcome.ABORTED, FailureCode.ABORTED.value
            raise
        finally:
            await self._ended()

    async def _failed(self, failure: Failure, ending: str) -> None:
        """The stream broke after its commit point: too late to switch, but a target that
        cuts streams still pays, charged before the error event, which a client may close
        on (the server then closes the relay at its ``yield``)."""
        call = self.call
        self.outcome, self.error_code = CallOutcome.FAILED, failure.code.value
        log.warning(
            "failed after content call=%s group=%s target=%s code=%s: %s "
            "(too late to retry or switch: %s, unless the group resumes it)",
            call.call_id,
            call.group.name,
            self.target.key,
            failure.code.value,
            failure.message,
            ending,
        )
        await call.charge(self.target, failure, probe=False)

    async def _rescue(
        self, reader: EventReader, failure: Failure, relay: Relay | None
    ) -> AsyncIterator[bytes]:
        """A mid-stream rescue when the group resumes and the rules allow it (SPEC §16):
        the continuation's bytes; ``self.rescue`` says how it went (None: not attempted)."""
        call = self.call
        partial = reader.partial
        if partial is None or not may_rescue(
            call.group.resume,
            failure.code,
            text=partial.text,
            tool_began=partial.tool_began,
            in_reasoning=partial.in_reasoning,
        ):
            return
        sink = sink_for(call.door, relay, reader, call.body, call.prepared.tool_names)
        if sink is None:
            return
        self.rescue = rescue = Rescue()
        async for out in continue_elsewhere(call, self.target, partial, sink, rescue):
            yield out

    def _unrescued(self) -> bool:
        """After a rescue (or none): whether the door's error event is still to be
        written. A rescue that finished makes the call OK; one that reached a target
        ended the stream itself, with the continuation's error event if it failed."""
        rescue = self.rescue
        if rescue is not None and rescue.ok:
            self.outcome, self.error_code = CallOutcome.OK, None
            return False
        return rescue is None or rescue.target is None

    async def _ended(self) -> None:
        call, answer = self.call, self.answer
        reader = answer.reader
        if reader is not None:
            # usage counted once: a rescued stream's is its continuation's
            rescue = self.rescue
            rescued = rescue is not None and rescue.target is not None
            call.record.usage = rescue.usage if rescued and rescue else reader.usage
            if call.served is not None:  # the cut attempt is paid for too
                call.served.usage = reader.usage
            if rescue is not None and rescue.attempt is not None:
                rescue.attempt.usage = rescue.usage
            await reader.aclose()
            if call.track_inflight:
                await call.runtime.store.inflight_add(self.target.key, -1)
        else:
            call.record.usage = answer.usage
        call.finish(self.outcome, error_code=self.error_code)


def _framed_prefix(payloads: list[bytes]) -> bytes:
    """The held-back payloads of a chat stream as SSE, one usage-only chunk at most."""
    held: list[bytes] = []
    usage_sent = False
    for payload in payloads:
        if _is_usage_only(payload):
            if usage_sent:
                continue
            usage_sent = True
        held.append(sse(payload))
    return b"".join(held)


def _is_usage_only(payload: bytes) -> bool:
    if b'"usage"' not in payload:
        return False
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return bool(chunk.get("usage")) and not chunk.get("choices")
