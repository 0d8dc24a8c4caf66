"""A leg: one front door paired with one upstream kind.

Same protocol on both sides = pass-through: the door's body goes out with only ``model``
rewritten and the upstream's events come back byte for byte (re-framed with their
``event:`` names). Otherwise the request goes door → canonical → kind, and the answer
kind → canonical → door. Either way the upstream's events are decoded to canonical chunks,
because the commit point, usage and cut detection read the canonical view.

``translate_request`` runs at the door before any upstream is called, checking the request
against each translation's table of fields (``routing.protocols.fields``). A kind that
cannot take the request is left out of the call: its targets are skipped, with the reason,
as embeddings skip ``anthropic`` targets. Only when no kind of the group can take it is the
request refused (``Unmappable`` → 400) — so a Claude Code request with a server tool still
reaches the group's ``anthropic`` targets, and never an upstream that would ignore the tool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from routing.protocols import Protocol, Unmappable
from routing.protocols.canonical import OPAQUE, EventDecoder, frame
from routing.protocols.registry import PROTOCOLS
from routing.protocols.responses import stream as responses_stream
from routing.protocols.responses.tools import HostedTools, ToolNames

Item = tuple[bytes, dict[str, Any], tuple[dict[str, Any], ...]]
"""One upstream stream event: its raw ``data`` payload, its JSON, its canonical chunks."""


Decoder = EventDecoder  # what the attempt reads a Messages or Responses stream through


def decoder_for(kind: Protocol) -> Decoder | None:
    """A stream decoder for an upstream kind; None for chat (already canonical)."""
    make = PROTOCOLS[kind].decoder
    return None if make is None else make()


def frame_for(kind: Protocol) -> Callable[[bytes, dict[str, Any]], bytes]:
    """How a Messages, Responses or Gemini event is framed on the wire: ``event:`` +
    ``data:`` for the first two (``canonical.frame``), a ``data:`` line alone for Gemini."""
    return frame if PROTOCOLS[kind].named_events else data_line


def data_line(payload: bytes, event: dict[str, Any]) -> bytes:
    """An upstream event relayed as a ``data:`` line (Gemini's streams name no events)."""
    return b"data: " + payload + b"\n\n"


def stream_error(kind: Protocol, event: dict[str, Any]) -> Any:
    """The error object an upstream stream event carries, if it is an error event."""
    return PROTOCOLS[kind].stream_error(event)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A door's request ready for every kind of its group: the canonical view and, per
    kind, the body (without ``model``) and the rewrite notes.

    ``canonical`` is the chat view continuity rewrites (the door's body itself for the
    chat door, and for a request only same-protocol targets take that has no chat view).
    ``door_notes`` are the notes of the door's own translation (part of every kind's
    ``notes``); ``refused`` says why each kind that cannot take the request is skipped."""

    door: Protocol
    body: dict[str, Any]
    bodies: dict[Protocol, dict[str, Any]] = field(default_factory=dict)
    notes: dict[Protocol, tuple[str, ...]] = field(default_factory=dict)
    canonical: dict[str, Any] = field(default_factory=dict)
    door_notes: tuple[str, ...] = ()
    refused: dict[Protocol, Unmappable] = field(default_factory=dict)
    # The Responses door's tools whose names a translated answer maps back
    # (``responses.tools``): namespaced and custom tools.
    tool_names: ToolNames = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.canonical:
            object.__setattr__(self, "canonical", self.body)

    def request(self, kind: Protocol, model: str) -> bytes:
        return wire_body(kind, self.body if kind is self.door else self.bodies[kind], model)[0]


def wire_body(kind: Protocol, body: dict[str, Any], model: str) -> tuple[bytes, list[str]]:
    """``body`` as a target of ``kind`` serving ``model`` gets it, and what that changed:
    ``model`` in it, or, for a kind whose URL names the model (Gemini), without what its
    door read from the URL and as its kind sends it on (``ProtocolSpec.outbound``)."""
    spec = PROTOCOLS[kind]
    if spec.model_in_body:
        return orjson.dumps({**body, "model": model}), []
    if spec.url_fields:
        body = {k: v for k, v in body.items() if k not in spec.url_fields}
    notes: list[str] = []
    if spec.outbound is not None:
        body, notes = spec.outbound(body, model)
    return orjson.dumps(body), notes


def translate_request(
    door: Protocol,
    body: dict[str, Any],
    kinds: Iterable[Protocol],
    *,
    hosted_tools: HostedTools = HostedTools.DROP,
) -> Prepared:
    """Translate ``body`` for every kind in ``kinds`` (in the group's target order).

    A kind that cannot take it lands in ``Prepared.refused``; raises ``Unmappable`` (the
    first kind's reason) when no kind can — or, on the Responses door, for stored state.
    ``hosted_tools`` is the group's: what a kind that cannot run hosted tools gets."""
    spec = PROTOCOLS[door]
    if spec.door_check is not None:  # e.g. Responses' stored state: whatever the targets
        spec.door_check(body)
    wanted = list(dict.fromkeys(kinds))
    others = [k for k in wanted if k is not door]
    if not others:  # pass-through only: no chat view is needed (the cheap path)
        return Prepared(door, body)
    door_notes: list[str] = []
    try:
        if spec.to_canonical is None:
            canonical, door_notes = body, []
        else:
            canonical, door_notes = spec.to_canonical(body, hosted_tools)
    except Unmappable as exc:  # nothing but the door's own kind can take it
        return _refused(door, body, wanted, dict.fromkeys(others, exc))
    names = spec.tool_names(body) if spec.tool_names is not None else {}
    prepared = Prepared(
        door, body, canonical=canonical, door_notes=tuple(door_notes), tool_names=names
    )
    model = str(body.get("model") or "")
    notes: list[str]
    for kind in others:
        from_canonical = PROTOCOLS[kind].from_canonical
        if from_canonical is None:
            prepared.bodies[kind], notes = canonical, []
        else:
            try:
                prepared.bodies[kind], notes = from_canonical(canonical, model)
            except Unmappable as exc:
                prepared.refused[kind] = Unmappable(
                    f"{exc} (a target of kind '{kind.value}')", param=exc.param
                )
                continue
        prepared.notes[kind] = tuple(door_notes + notes)
    if prepared.refused:
        return _refused(door, body, wanted, prepared.refused, prepared)
    return prepared


def _refused(
    door: Protocol,
    body: dict[str, Any],
    wanted: list[Protocol],
    refused: dict[Protocol, Unmappable],
    prepared: Prepared | None = None,
) -> Prepared:
    if all(kind in refused for kind in wanted):
        raise next(refused[kind] for kind in wanted)
    if prepared is None:
        prepared = Prepared(door, body)
    prepared.refused.update(refused)
    return prepared


def skipped_targets(
    prepared: Prepared | None, targets: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """Why each target (``key``, ``kind``) of a kind that cannot take the request is skipped."""
    if prepared is None or not prepared.refused:
        return {}
    return {
        key: f"kind '{kind}' cannot take this request: {prepared.refused[Protocol(kind)]}"
        for key, kind in targets
        if Protocol(kind) in prepared.refused
    }


def translate_body(
    kind: Protocol, canonical: dict[str, Any], model: str
) -> tuple[bytes, list[str]]:
    """A (rewritten) canonical body in ``kind``'s protocol: checked translatable at the
    door already, so ``Unmappable`` here would be a bug."""
    from_canonical = PROTOCOLS[kind].from_canonical
    if from_canonical is None:
        return orjson.dumps({**canonical, "model": model}), []
    body, notes = from_canonical(canonical, model)
    return orjson.dumps(body), notes


# ------------------------------------------------------------------------ answers (JSON)
def completion_to_canonical(kind: Protocol, body: dict[str, Any]) -> dict[str, Any]:
    to_canonical = PROTOCOLS[kind].completion_to_canonical
    return body if to_canonical is None else to_canonical(body)


def completion_for_door(
    door: Protocol, canonical: dict[str, Any], names: ToolNames | None = None
) -> bytes:
    """``names``: the Responses door's tools to map back (``Prepared.tool_names``)."""
    return PROTOCOLS[door].completion_for_door(canonical, names)


# ------------------------------------------------------------------------------ streams
class Relay:
    """Turns committed upstream items into the door's stream bytes."""

    def encode(self, items: list[Item]) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def end(self) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def error(self, message: str, *, code: str, status: int = 502) -> bytes:
        raise NotImplementedError  # pragma: no cover - interface


class PassThrough(Relay):
    """Messages → Messages, Responses → Responses: the upstream's own events. After the
    commit point the reader hands out their bytes itself (``EventReader.next_sse``); this
    frames the held-back ones and writes the door's error event."""

    def __init__(self, door: Protocol, decoder: Decoder | None = None) -> None:
        self.door = door
        self._frame = frame_for(door)
        self._decoder = decoder  # the live stream's: a Responses failure names its response

    def encode(self, items: list[Item]) -> bytes:
        frame = self._frame
        return b"".join(frame(payload, event) for payload, event, _ in items)

    def end(self) -> bytes:
        return b""  # the upstream's message_stop / response.completed already went out

    def error(self, message: str, *, code: str, status: int = 502) -> bytes:
        decoder = self._decoder
        if self.door is Protocol.RESPONSES and isinstance(decoder, responses_stream.StreamDecoder):
            if decoder.id:
                return responses_stream.failed_event(
                    decoder.id, decoder.model, decoder.next_sequence, message, code
                )
        return door_error_event(self.door, message, code=code, status=status)


class Translating(Relay):
    """Any kind → a door whose protocol is not the canonical view, through its encoder."""

    def __init__(self, door: Protocol, names: ToolNames | None = None) -> None:
        self.door = door
        make = PROTOCOLS[door].encoder
        if make is None:
            raise ValueError(f"the {door.value} door has no stream encoder")
        self._encoder = make(names)

    def encode(self, items: list[Item]) -> bytes:
        return self._encoder.encode([c for _, _, chunks in items for c in chunks])

    def end(self) -> bytes:
        return self._encoder.end()

    def error(self, message: str, *, code: str, status: int = 502) -> bytes:
        if isinstance(self._encoder, responses_stream.StreamEncoder):  # its own response
            return self._encoder.error(message, code)
        return door_error_event(self.door, message, code=code, status=status)


class ToChat(Relay):
    """Anthropic or Responses upstream → the chat door: canonical chunks as ``data:``
    lines, the usage chunk only when the client asked for it, then ``[DONE]``."""

    def __init__(self, *, include_usage: bool) -> None:
        self.include_usage = include_usage

    def encode(self, items: list[Item]) -> bytes:
        out = []
        for _, _, chunks in items:
            for chunk in chunks:
                choices = chunk["choices"]
                if not choices and not self.include_usage:
                    continue
                if choices and OPAQUE in choices[0]["delta"]:
                    continue  # a hosted call's marker: nothing a chat client reads
                out.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
        return b"".join(out)

    def end(self) -> bytes:
        return b"data: [DONE]\n\n"

    def error(self, message: str, *, code: str, status: int = 502) -> bytes:
        return door_error_event(Protocol.CHAT, message, code=code, status=status)


def relay_for(
    door: Protocol,
    kind: Protocol,
    body: dict[str, Any],
    decoder: Decoder | None = None,
    names: ToolNames | None = None,
) -> Relay:
    """``decoder``: the live stream's (a pass-through's error event reads it); ``names``:
    the Responses door's tools to map back (``Prepared.tool_names``)."""
    if door is kind:
        return PassThrough(door, decoder)
    if PROTOCOLS[door].canonical:
        options = body.get("stream_options")
        return ToChat(
            include_usage=isinstance(options, dict) and bool(options.get("include_usage"))
        )
    return Translating(door, names)


# ------------------------------------------------------------------------------- errors
def door_error_body(
    door: Protocol, message: str, *, code: str, type: str, status: int, param: str | None = None
) -> bytes:
    return PROTOCOLS[door].error_body(message, code=code, type=type, status=status, param=param)


def door_error_event(door: Protocol, message: str, *, code: str, status: int = 502) -> bytes:
    return PROTOCOLS[door].error_event(message, code=code, status=status)
