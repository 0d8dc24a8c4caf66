"""The model name an answer carries: the one the client asked for (SPEC §3, step 11).

Clients take an answer's ``model`` for the conversation's identity — Claude Code sends its
signed thinking blocks back only when it equals the name it asked for — so every answer, at
every door, streamed or not, names the group, alias or direct name of the request. The
concrete model that answered is on ``x-switchyard-target``, the call's record and its
traces.

Renaming stays off the per-chunk path where it can: a member is rewritten in the bytes the
upstream sent (``"model":"<its name>"``, found exactly once) rather than the JSON
re-encoded. A chat stream names its model in every chunk, so its relay renames each write
with one byte replacement learned from the first chunk it parsed (``Renamer``); a Messages
or Responses stream names it in a few events only (``message_start``, the ``response.*``
lifecycle events), and only those are rewritten; a Gemini answer and each of its stream's
chunks name it in ``modelVersion``.
"""

from __future__ import annotations

from typing import Any

import orjson


def _keys(member: str) -> tuple[bytes, bytes]:
    """The member's key as compact JSON (most servers) and as Python's json.dumps writes it."""
    if member == "model":
        return _KEYS
    return (b'"' + member.encode() + b'":', b'"' + member.encode() + b'": ')


_KEYS = (b'"model":', b'"model": ')


def _key(payload: bytes, model: str, member: str = "model") -> bytes | None:
    """The key of ``payload``'s ``member`` naming ``model``, as the upstream spelled it,
    when the bytes show that member exactly once; None otherwise (re-encode)."""
    value = orjson.dumps(model)
    for key in _keys(member):
        if payload.count(key + value) == 1:
            return key
    return None


def renamed(
    payload: bytes, holder: dict[str, Any], name: str, whole: Any = None, member: str = "model"
) -> bytes:
    """``payload`` with ``holder``'s ``member`` (``model``) set to ``name``: its one member
    rewritten in place, or, when the bytes do not show it once, ``whole`` (the parsed
    payload, which holds ``holder``; ``holder`` itself by default) re-encoded. ``holder``
    is updated."""
    old = holder.get(member)
    holder[member] = name
    key = _key(payload, old, member) if isinstance(old, str) else None
    if key is None:
        return orjson.dumps(holder if whole is None else whole)
    return payload.replace(key + orjson.dumps(old), key + orjson.dumps(name))


def rename_event(payload: bytes, event: dict[str, Any], name: str) -> bytes | None:
    """A Messages, Responses or Gemini stream event's payload renamed to ``name`` (``event``
    too); None when it names no model (most events of the first two) or names ``name``."""
    held, member = carrier(event), "model"
    if held is None:
        if type(event.get(GEMINI_MEMBER)) is not str:
            return None
        held, member = event, GEMINI_MEMBER
    if held[member] == name:
        return None
    return renamed(payload, held, name, event, member)


def rename_answer(raw: bytes, answer: dict[str, Any], name: str) -> bytes | None:
    """A JSON answer renamed to ``name`` (its ``model``, a Gemini answer's ``modelVersion``);
    None when it names no model or names ``name``."""
    member = GEMINI_MEMBER if "model" not in answer and GEMINI_MEMBER in answer else "model"
    old = answer.get(member)
    if old is None or old == name:
        return None
    return renamed(raw, answer, name, member=member)


GEMINI_MEMBER = "modelVersion"  # a GenerateContentResponse names its model there


def carrier(event: dict[str, Any]) -> dict[str, Any] | None:
    """The object of a Messages or Responses stream event that names the model
    (``message_start``'s ``message``, a ``response.*`` event's ``response``), if any."""
    for key in ("message", "response"):
        held = event.get(key)
        if type(held) is dict and "model" in held:
            return held
    return None


class Renamer:
    """Renames one chat stream's chunks to ``name``.

    ``chunk`` renames a parsed chunk (its dict and its bytes); once it has seen the
    upstream's own ``model`` member in a chunk's bytes, ``old`` and ``new`` are that
    member's bytes and the replacement, and a relay that passes whole events on renames a
    write with ``write`` (the chunks it did not parse included) instead of chunk by chunk.
    """

    __slots__ = ("name", "old", "new", "_seen")

    def __init__(self, name: str) -> None:
        self.name = name
        self.old = b""
        self.new = b""
        self._seen = ""  # the upstream's model name ``old`` spells

    def chunk(self, payload: bytes, chunk: dict[str, Any], *, deferred: bool) -> bytes | None:
        """``payload`` renamed (``chunk`` too); None when ``deferred`` and ``write`` will
        rename it (its member is ``old``)."""
        model = chunk.get("model")
        if not isinstance(model, str) or model == self.name:
            return payload
        if model != self._seen:
            key = _key(payload, model)
            if key is not None:
                self._seen = model
                self.old, self.new = key + orjson.dumps(model), key + orjson.dumps(self.name)
        chunk["model"] = self.name
        if model == self._seen:
            return None if deferred else payload.replace(self.old, self.new)
        return orjson.dumps(chunk)

    def write(self, out: bytes) -> bytes:
        """A write of whole events renamed: every ``old`` member in it."""
        return out.replace(self.old, self.new) if self.old else out
