"""Amazon Bedrock's Converse API (``kind: bedrock-converse``) <-> the canonical view.

A target-only kind: no front door speaks Converse, and only the ``bedrock`` platform
reaches it (``/model/{modelId}/converse`` and ``/converse-stream``, the model in the URL,
so the body never names it). Requests (``request.from_canonical``), answers
(``reply.completion_to_canonical``) and streams (``stream.StreamDecoder``: the platform's
event-stream reader hands each frame over as ``{"<eventType>": <payload>}``).

Mapping decisions: system and developer messages (anywhere) → ``system`` text blocks, in
order; ``user``/``assistant`` turns → ``messages`` with ``text``, ``image`` (base64 data
URLs only: Converse takes bytes, not URLs — an http image URL is refused) and ``toolUse``
blocks; ``tool`` messages → ``toolResult`` blocks in the next user turn (consecutive
same-role turns are merged: Converse alternates roles); function tools → ``toolConfig``
(``toolSpec``, ``inputSchema.json``), ``tool_choice`` auto/required/a name →
``auto``/``any``/``tool`` (``none`` has no Converse form: tools are left out when the
history has no tool blocks, else kept and the choice dropped with a note); ``max_tokens``,
``temperature``, ``top_p``, ``stop`` → ``inferenceConfig``; ``reasoning_effort`` →
the model's own setting in ``additionalModelRequestFields`` (Claude's ``thinking`` budget,
Amazon Nova's ``reasoningConfig``; dropped with a note for a model whose setting is not
known). Answers: ``reasoningContent`` ↔
``reasoning_content`` (history reasoning is dropped with a note: Bedrock wants its own
signed reasoning back), ``toolUse`` ↔ tool calls, ``stopReason`` ↔ finish reasons, usage
with cache reads and writes.
"""

from __future__ import annotations

from routing.protocols.converse.reply import completion_to_canonical
from routing.protocols.converse.request import from_canonical, test_body
from routing.protocols.converse.stream import StreamDecoder

__all__ = ["StreamDecoder", "completion_to_canonical", "from_canonical", "test_body"]
