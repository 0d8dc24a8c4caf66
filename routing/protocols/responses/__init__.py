"""OpenAI Responses <-> the canonical (Chat Completions) view.

Requests (``request``): ``to_canonical`` (the ``/v1/responses`` door's body: ``input`` as a
string or items, ``instructions``, function tools, ``reasoning``) and ``from_canonical`` (the
body an ``openai-responses`` target gets, always ``store: false``). Answers (``reply``) and
streams (``stream``) as in ``messages``; ``StreamEncoder`` emits the standard event sequence
with ``sequence_number``. Tools (``tools``): namespaces, custom (freeform) and hosted tools.

The gateway is stateless here (SPEC §12): ``previous_response_id`` and
``conversation`` are refused with a message saying to send the conversation in ``input``;
``store`` is answered as false. Hosted tools (web/file search, code interpreter, MCP…)
and item types other than messages, function calls/outputs and reasoning are refused
when the target would need a translation. Top-level fields follow ``DOOR_FIELDS`` and
``TARGET_FIELDS`` (``routing.protocols.fields``).

The names below are the ones the gateway and the tests use; ``routing.protocols.legs``
imports the submodules themselves.
"""

from __future__ import annotations

from routing.protocols.responses.reply import completion_from_canonical, completion_to_canonical
from routing.protocols.responses.request import from_canonical, to_canonical
from routing.protocols.responses.stream import StreamDecoder, StreamEncoder, continuing

__all__ = [
    "StreamDecoder",
    "StreamEncoder",
    "completion_from_canonical",
    "completion_to_canonical",
    "continuing",
    "from_canonical",
    "to_canonical",
]
