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
from dataclasses import dataclass

PROVENANCE_TTL_S = 24 * 3600.0
SESSION_TURNS_LIMIT = 512  # turns remembered per session (the oldest are forgotten)
SHARED_TURNS_LIMIT = 20_000  # turns remembered for calls without a session key


def fingerprint_of(text: str, tool_call_ids: Sequence[str], reasoning: str = "") -> str | None:
    """A short stable key for an assistant turn: its visible text and tool-call ids, or its
    reasoning when it has neither. None for a turn with nothing to identify it by."""
    if tool_call_ids:
        text = "\x1f".join((text, *tool_call_ids))
    elif not text:
        if not reasoning:
            return None
        text = "\x1ereasoning\x1e" + reasoning
    data = text.encode("utf-8", "surrogatepass")
    # Two cheap checksums and the length (~60 bits): plenty to tell apart the turns of one
    # scope (a collision costs at most one turn rewritten as if another target wrote it),
    # and several times cheaper than a cryptographic hash on the rewrite path.
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


@dataclass(frozen=True, slots=True)
class Producer:
    """A target as provenance knows it. ``provider`` None: only the model is known (an
    envelope without a provider), and then turns compare, and labels read, by model."""

    provider: str | None
    model: str

    @classmethod
    def from_key(cls, key: str) -> Producer:
        provider, sep, model = key.partition("/")
        return cls(provider, model) if sep and model else cls(None, key)

    def same_target(self, other: Producer) -> bool:
        if self.provider is None or other.provider is None:
            return self.model == other.model
        return self.provider == other.provider and self.model == other.model


def label(route: Producer, other: Producer) -> str:
    """Seed 003's rule: ``model`` when both providers are the same, else ``provider/model``."""
    if route.provider is None or other.provider is None or route.provider == other.provider:
        return route.model
    return f"{route.provider}/{route.model}"
