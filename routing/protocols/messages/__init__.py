"""Anthropic Messages <-> the canonical (Chat Completions) view.

Requests (``request``): ``to_canonical`` (the ``/v1/messages`` door's body) and
``from_canonical`` (the body an ``anthropic`` target gets). Answers (``reply``):
``completion_to_canonical`` / ``completion_from_canonical``, and the door's error body.
Streams (``stream``): ``StreamDecoder`` (an upstream's events → canonical chunks) and
``StreamEncoder`` (canonical chunks → the door's events, preamble included).

Mapping decisions: ``system`` ↔ system messages; ``tool_use``/``tool_result`` blocks ↔
``tool_calls`` / ``tool`` messages; ``thinking`` ↔ ``reasoning_content`` (a thinking block
from another protocol has no signature Anthropic would accept, so history reasoning sent
*to* an Anthropic target is dropped, with a rewrite note); ``thinking.budget_tokens`` ↔
``reasoning_effort`` (an ``output_config.effort`` level, when sent, is the effort itself;
``max`` becomes ``xhigh``); ``output_config.format`` (json_schema) ↔ ``response_format``
json_schema; a mid-conversation ``system`` message stays in place as a system message;
``stop_sequences`` ↔ ``stop``; cache token counts ↔ the
canonical usage's cache fields. Server tools (``web_search_…``), documents and other block types
have no counterpart and are refused (``Unmappable``). Top-level fields follow the tables
``DOOR_FIELDS`` (this door → another kind) and ``TARGET_FIELDS`` (a chat request → an
``anthropic`` target): mapped, dropped with a note, or refused (``routing.protocols.fields``).

The names below are the ones the gateway and the tests use; ``routing.protocols.legs``
imports the submodules themselves.
"""

from __future__ import annotations

from routing.protocols.messages.reply import completion_from_canonical, completion_to_canonical
from routing.protocols.messages.request import from_canonical, to_canonical
from routing.protocols.messages.stream import StreamDecoder, StreamEncoder

__all__ = [
    "StreamDecoder",
    "StreamEncoder",
    "completion_from_canonical",
    "completion_to_canonical",
    "from_canonical",
    "to_canonical",
]
