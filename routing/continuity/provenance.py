"""Who produced an assistant turn, and the fingerprint a turn is remembered by.

The gateway records, for every answer it serves, ``fingerprint -> target key`` in the
state store (by session, and by response id), bounded and with a TTL. A client sends the
turn back in its next request's history; the same text and tool-call ids give the same
fingerprint, so the turn's producer is found again without trusting anything the client
says about it. A turn the gateway did not serve has no provenance and is never rewritten.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import NamedTuple

from routing.continuity.family import same_family
from routing.engine.targets import split_target_key, target_key

PROVENANCE_TTL_S = 24 * 3600.0
SESSION_TURNS_LIMIT = 512  # turns remembered per session (the oldest are forgotten)
SHARED_TURNS_LIMIT = 20_000  # turns remembered for calls without a session key


REASONING_MARK = "\x1ereasoning\x1e"  # keeps a reasoning-only turn apart from a text one
TOOL_CALL_MARK = "\x1f"  # before each tool-call id


def _encode(text: str) -> bytes:
    # surrogatepass: a lone surrogate (half a pair split across two stream chunks) encodes
    # the same in pieces as in the joined string, so a streamed turn keeps its fingerprint.
    return text.encode("utf-8", "surrogatepass")


def _digest(crc: int, adler: int, length: int) -> str:
    return "%08x%08x%x" % (crc, adler, length)  # noqa: UP031 — half the cost of an f-string


def fingerprint_of(text: str, tool_call_ids: Sequence[str], reasoning: str = "") -> str | None:
    """A short stable key for an assistant turn: its visible text and tool-call ids, or its
    reasoning when it has neither. None for a turn with nothing to identify it by."""
    if tool_call_ids:
        text = TOOL_CALL_MARK.join((text, *tool_call_ids))
    elif not text:
        if not reasoning:
            return None
        text = REASONING_MARK + reasoning
    data = text.encode("utf-8", "surrogatepass")
    # Two cheap checksums and the length (~60 bits): plenty to tell apart the turns of one
    # scope (a collision costs at most one turn rewritten as if another target wrote it),
    # and several times cheaper than a cryptographic hash on the rewrite path. (Inlined:
    # this runs for every assistant turn of a switched history.)
    return "%08x%08x%x" % (zlib.crc32(data), zlib.adler32(data), len(data))  # noqa: UP031


class _Running:
    """crc32, adler32 and length of a byte string fed in pieces (both checksums continue
    from a previous value, so the pieces themselves need not be kept)."""

    __slots__ = ("adler", "crc", "length")

    def __init__(self, prefix: str = "") -> None:
        data = _encode(prefix)
        self.crc, self.adler, self.length = zlib.crc32(data), zlib.adler32(data), len(data)

    def add(self, text: str) -> None:
        self.add_bytes(_encode(text))

    def add_bytes(self, data: bytes) -> None:
        """``add`` of text already UTF-8 encoded (a relayed chunk's bytes, not decoded)."""
        self.crc = zlib.crc32(data, self.crc)
        self.adler = zlib.adler32(data, self.adler)
        self.length += len(data)


class RunningFingerprint:
    """:func:`fingerprint_of` for a turn read in pieces (a stream's deltas), in constant
    memory: the text and the reasoning are checksummed as they arrive, never kept; only
    the tool-call ids are (a few per turn). ``value()`` equals ``fingerprint_of`` of the
    joined pieces."""

    __slots__ = ("_ids", "_reasoning", "_text")

    def __init__(self) -> None:
        self._text = _Running()
        self._reasoning = _Running(REASONING_MARK)
        self._ids: list[str] = []

    def add_text(self, text: str) -> None:
        if text:
            self._text.add(text)

    def add_text_utf8(self, data: bytes) -> None:
        """``add_text`` of valid UTF-8 bytes: the same fingerprint, no decode or encode."""
        if data:
            self._text.add_bytes(data)

    def add_reasoning(self, text: str) -> None:
        if text:
            self._reasoning.add(text)

    def add_tool_call_id(self, call_id: str) -> None:
        self._ids.append(call_id)

    def value(self) -> str | None:
        text = self._text
        if self._ids:
            crc, adler, length = text.crc, text.adler, text.length
            for call_id in self._ids:
                data = _encode(TOOL_CALL_MARK + call_id)
                crc, adler = zlib.crc32(data, crc), zlib.adler32(data, adler)
                length += len(data)
            return _digest(crc, adler, length)
        if text.length:
            return _digest(text.crc, text.adler, text.length)
        reasoning = self._reasoning
        if reasoning.length == len(REASONING_MARK):
            return None
        return _digest(reasoning.crc, reasoning.adler, reasoning.length)


class Producer(NamedTuple):
    """A target as provenance knows it. ``provider`` None: only the model is known (an
    envelope without a provider), and then turns compare, and labels read, by model.
    (A named tuple: rewriting hashes one per turn, and a tuple hashes in C.)"""

    provider: str | None
    model: str

    @classmethod
    def from_key(cls, key: str) -> Producer:
        parts = split_target_key(key)
        return cls(parts.provider, parts.model) if parts is not None else cls(None, key)

    def same_target(self, other: Producer) -> bool:
        """Whether a turn this target wrote is, to ``other``, its own: the same provider
        and model, or the same Claude under another cloud's name for it (its signed
        thinking is valid on every platform Anthropic serves it on; see ``family``)."""
        if self.model == other.model and (
            self.provider is None or other.provider is None or self.provider == other.provider
        ):
            return True
        return same_family(self.model, other.model)


def label(route: Producer, other: Producer) -> str:
    """Seed 003's rule: ``model`` when both providers are the same, else ``provider/model``."""
    if route.provider is None or other.provider is None or route.provider == other.provider:
        return route.model
    return target_key(route.provider, route.model)
