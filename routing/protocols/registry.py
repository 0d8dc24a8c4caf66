"""The one place a protocol (a provider ``kind``) and a platform are declared (SPEC §12, §19).

A **protocol** is what a provider's upstream speaks and what a front door speaks: its
codecs (request to and from the canonical view, answers, the stream decoder and encoder),
its history view (continuity), its error shapes, its display name and its door's name, and
what its upstream's API offers (embeddings, token counting, an assistant prefill). A
**platform** is where and how a protocol is reached: the URL layout, the authentication
headers, the stream framing and the error shape: ``direct`` (the vendor's own API at
``base_url``) and one module each in ``routing.platforms`` (section 19: ``bedrock``,
``vertex``, ``azure``). A platform wraps a protocol; it never re-translates it.

Everything that names kinds or platforms derives from :data:`PROTOCOLS` and
:data:`PLATFORMS`: the provider model's choices, the config schema's and the API's
literals, the upstream client, the ledger's door names, the spans' ``gen_ai.provider.name``
(``tests/test_enum_mirrors.py`` holds the copies that must stay apart — the ledger's
``TextChoices`` and the migrations — to it). Which door talks to which kind is decided by
looking both up here once: a provider's protocol is resolved when the routing table is
compiled (``ProviderSpec.protocol``), so a call pays a dict lookup at most.

Adding a protocol or a platform: CONTRIBUTING.md ("Adding a protocol", "Adding a platform").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import orjson

from routing.continuity.chat import ChatHistory
from routing.continuity.gemini import GeminiHistory
from routing.continuity.messages import MessagesHistory
from routing.continuity.responses import ResponsesHistory
from routing.platforms.azure import AZURE
from routing.platforms.base import PlatformSettings as PlatformSettings
from routing.platforms.base import PlatformSpec as PlatformSpec
from routing.platforms.bedrock import BEDROCK
from routing.platforms.vertex import VERTEX
from routing.protocols import Protocol, chat
from routing.protocols.canonical import EventDecoder, EventEncoder
from routing.protocols.converse import reply as converse_reply
from routing.protocols.converse import request as converse_request
from routing.protocols.converse import stream as converse_stream
from routing.protocols.gemini import reply as gemini_reply
from routing.protocols.gemini import request as gemini_request
from routing.protocols.gemini import stream as gemini_stream
from routing.protocols.messages import reply as messages_reply
from routing.protocols.messages import request as messages_request
from routing.protocols.messages import stream as messages_stream
from routing.protocols.responses import reply as responses_reply
from routing.protocols.responses import request as responses_request
from routing.protocols.responses import stream as responses_stream
from routing.protocols.responses.tools import HostedTools, ToolNames, tool_names

Body = dict[str, Any]
Translated = tuple[Body, list[str]]  # a body and the notes of what the translation did
History = type[ChatHistory] | type[MessagesHistory] | type[ResponsesHistory] | type[GeminiHistory]


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """One protocol: a provider ``kind`` and the front door that speaks it.

    ``to_canonical``/``from_canonical`` are None for chat, whose bodies are the canonical
    view (``canonical``); ``completion_to_canonical`` and ``decoder`` likewise."""

    kind: Protocol
    label: str  # display name (the provider form's choices, pages)
    door: str | None  # its front door's name on the ledger, events and traces (None: none)
    vendor: str  # gen_ai.provider.name on spans (the GenAI conventions' well-known value)
    # Continuity's view of its request bodies at its own door (None: no door speaks it, so
    # no body of its shape is ever rewritten).
    history: History | None
    test_body: Callable[[str], dict[str, object]]  # the "test" button's and health check's
    error_body: Callable[..., bytes]  # (message, *, code, type, status, param) -> JSON
    error_event: Callable[..., bytes]  # (message, *, code, status) -> the failed stream's end
    stream_error: Callable[[Body], Any]  # the error a stream event carries, if any
    completion_for_door: Callable[[Body, ToolNames | None], bytes]  # canonical -> door JSON
    to_canonical: Callable[[Body, HostedTools], Translated] | None = None  # door -> canonical
    from_canonical: Callable[[Body, str], Translated] | None = None  # canonical -> target
    completion_to_canonical: Callable[[Body], Body] | None = None
    decoder: Callable[[], EventDecoder] | None = None  # an upstream stream's events -> chunks
    encoder: Callable[[ToolNames | None], EventEncoder] | None = None  # chunks -> door events
    door_check: Callable[[Body], None] | None = None  # raises Unmappable whatever the targets
    tool_names: Callable[[Body], ToolNames] | None = None  # tools a translated answer maps back
    # The vendor's own API (what the direct platform reaches):
    path: str = "/chat/completions"  # the endpoint under a base ending in /v1
    versioned_base: bool = False  # its documented base has no version (added unless present)
    version: str = "/v1"  # the version a versioned base gets (Gemini's: /v1beta)
    # The endpoint when the URL names the model and whether to stream (Gemini's
    # ``/models/{model}:streamGenerateContent?alt=sse``); None: ``path``, the same for all.
    model_path: Callable[[str, bool], str] | None = None
    model_in_body: bool = True  # a request body names its model (Gemini's do not)
    # What its door reads from the URL and keeps as body fields, never sent on in a body
    # (Gemini's model and stream: ``routing.api.pipeline.serve``'s ``url_fields``).
    url_fields: tuple[str, ...] = ()
    model_member: str = "model"  # the answer's member naming its model (Gemini's modelVersion)
    named_events: bool = True  # its stream's events have ``event:`` names (Gemini's do not)
    # A body as its own kind's upstream gets it from its own door, and the notes (Gemini 3's
    # placeholder signatures where history lost them); None: as it is.
    outbound: Callable[[Body, str], Translated] | None = None
    auth_header: str = "authorization"  # the API key's header ("authorization": Bearer)
    headers: Mapping[str, str] = field(default_factory=dict)  # sent on every request
    embeddings: bool = False  # has <base>/embeddings
    count_tokens: bool = False  # has <endpoint>/count_tokens (SPEC §15)
    prefill: bool = True  # a rescue may continue with an assistant prefill (SPEC §16)
    direct: bool = True  # its vendor's own API is reachable at a base_url (``DIRECT``)

    @property
    def canonical(self) -> bool:
        """Its bodies are the canonical view: nothing to translate in or out."""
        return self.from_canonical is None


def _messages_error_body(
    message: str, *, code: str, type: str, status: int, param: str | None = None
) -> bytes:
    return messages_reply.error_body(message, status=status)


def _messages_error_event(message: str, *, code: str, status: int = 502) -> bytes:
    return messages_stream.error_event(message, status=status)


def _responses_error_event(message: str, *, code: str, status: int = 502) -> bytes:
    return responses_stream.StreamEncoder().error(message, code)


def _messages_encoder(names: ToolNames | None) -> EventEncoder:
    return messages_stream.StreamEncoder()


def _messages_to_canonical(body: Body, hosted_tools: HostedTools) -> Translated:
    return messages_request.to_canonical(body)


def _messages_completion(canonical: Body, names: ToolNames | None) -> bytes:
    return orjson.dumps(messages_reply.completion_from_canonical(canonical))


def _responses_completion(canonical: Body, names: ToolNames | None) -> bytes:
    return orjson.dumps(responses_reply.completion_from_canonical(canonical, names))


def _gemini_error_body(
    message: str, *, code: str, type: str, status: int, param: str | None = None
) -> bytes:
    return gemini_reply.error_body(message, status=status)


def _gemini_error_event(message: str, *, code: str, status: int = 502) -> bytes:
    return gemini_stream.error_event(message, status=status)


def _gemini_encoder(names: ToolNames | None) -> EventEncoder:
    return gemini_stream.StreamEncoder()


def _gemini_completion(canonical: Body, names: ToolNames | None) -> bytes:
    return orjson.dumps(gemini_reply.completion_from_canonical(canonical))


def _converse_error_body(
    message: str, *, code: str, type: str, status: int, param: str | None = None
) -> bytes:
    return converse_reply.error_body(message, status=status)


def _converse_error_event(message: str, *, code: str, status: int = 502) -> bytes:
    return b"data: " + converse_reply.error_body(message, status=status) + b"\n\n"


def _converse_completion(canonical: Body, names: ToolNames | None) -> bytes:
    return orjson.dumps(converse_reply.completion_from_canonical(canonical))


def _no_stream_error(event: Body) -> None:
    """Converse streams carry no error events: an exception frame is the reader's failure."""
    return None


def _gemini_path(model: str, stream: bool) -> str:
    name = quote(model.removeprefix("models/"), safe="")
    if stream:
        return f"/models/{name}:streamGenerateContent?alt=sse"
    return f"/models/{name}:generateContent"


# The protocol registry: one entry per provider kind.
PROTOCOLS: dict[Protocol, ProtocolSpec] = {
    spec.kind: spec
    for spec in (
        ProtocolSpec(
            Protocol.CHAT,
            label="OpenAI-compatible chat completions",
            door="chat",
            vendor="openai",
            history=ChatHistory,
            test_body=chat.test_body,
            error_body=chat.error_body,
            error_event=chat.error_event,
            stream_error=chat.stream_error,
            completion_for_door=chat.completion_for_door,
            embeddings=True,
        ),
        ProtocolSpec(
            Protocol.MESSAGES,
            label="Anthropic Messages",
            door="messages",
            vendor="anthropic",
            history=MessagesHistory,
            test_body=messages_request.test_body,
            error_body=_messages_error_body,
            error_event=_messages_error_event,
            stream_error=chat.stream_error,
            completion_for_door=_messages_completion,
            to_canonical=_messages_to_canonical,
            from_canonical=messages_request.from_canonical,
            completion_to_canonical=messages_reply.completion_to_canonical,
            decoder=messages_stream.StreamDecoder,
            encoder=_messages_encoder,
            path="/messages",
            versioned_base=True,
            auth_header="x-api-key",
            headers={"anthropic-version": "2023-06-01"},
            count_tokens=True,
        ),
        ProtocolSpec(
            Protocol.RESPONSES,
            label="OpenAI Responses",
            door="responses",
            vendor="openai",
            history=ResponsesHistory,
            test_body=responses_request.test_body,
            error_body=chat.error_body,
            error_event=_responses_error_event,
            stream_error=responses_stream.error_from_event,
            completion_for_door=_responses_completion,
            to_canonical=responses_request.to_canonical,
            from_canonical=responses_request.from_canonical,
            completion_to_canonical=responses_reply.completion_to_canonical,
            decoder=responses_stream.StreamDecoder,
            encoder=responses_stream.StreamEncoder,
            door_check=responses_request.refuse_stored,
            tool_names=tool_names,
            path="/responses",
            embeddings=True,
            prefill=False,
        ),
        ProtocolSpec(
            Protocol.GEMINI,
            label="Google Gemini (generateContent)",
            door="gemini",
            vendor="gcp.gemini",
            history=GeminiHistory,
            test_body=gemini_request.test_body,
            error_body=_gemini_error_body,
            error_event=_gemini_error_event,
            stream_error=chat.stream_error,  # {"error": {"code", "message", "status"}}
            completion_for_door=_gemini_completion,
            to_canonical=gemini_request.to_canonical,
            from_canonical=gemini_request.from_canonical,
            completion_to_canonical=gemini_reply.completion_to_canonical,
            decoder=gemini_stream.StreamDecoder,
            encoder=_gemini_encoder,
            path="/models",
            versioned_base=True,
            version="/v1beta",
            model_path=_gemini_path,
            model_in_body=False,
            url_fields=("model", "stream"),
            model_member="modelVersion",
            named_events=False,
            outbound=gemini_request.signed_for,
            auth_header="x-goog-api-key",
            prefill=False,  # Gemini continues no model turn left open
        ),
        ProtocolSpec(  # Amazon Bedrock's Converse: a target only, on the bedrock platform
            Protocol.CONVERSE,
            label="Amazon Bedrock Converse",
            door=None,
            vendor="aws.bedrock",
            history=None,
            test_body=converse_request.test_body,
            error_body=_converse_error_body,
            error_event=_converse_error_event,
            stream_error=_no_stream_error,
            completion_for_door=_converse_completion,
            from_canonical=converse_request.from_canonical,
            completion_to_canonical=converse_reply.completion_to_canonical,
            decoder=converse_stream.StreamDecoder,
            path="/converse",
            model_in_body=False,
            prefill=False,  # not every Converse model continues an assistant turn
            direct=False,  # Bedrock's API: reached on the bedrock platform only
        ),
    )
}


DIRECT = PlatformSpec(
    "direct",
    "the vendor's own API at base_url",
    frozenset(kind for kind, spec in PROTOCOLS.items() if spec.direct),
)

# The platform registry: one entry per platform.
PLATFORMS: dict[str, PlatformSpec] = {
    platform.name: platform for platform in (DIRECT, BEDROCK, VERTEX, AZURE)
}
PLATFORM_CHOICES: list[tuple[str, str]] = [(name, p.label) for name, p in PLATFORMS.items()]

KIND_PROTOCOLS: dict[str, ProtocolSpec] = {kind.value: spec for kind, spec in PROTOCOLS.items()}
KINDS: tuple[str, ...] = tuple(kind.value for kind in PROTOCOLS)
KIND_CHOICES: list[tuple[str, str]] = [(kind.value, spec.label) for kind, spec in PROTOCOLS.items()]
DOOR_NAMES: dict[str, str] = {  # the kinds a front door speaks
    kind.value: spec.door for kind, spec in PROTOCOLS.items() if spec.door is not None
}
VENDORS: dict[str, str] = {kind.value: spec.vendor for kind, spec in PROTOCOLS.items()}

if TYPE_CHECKING:  # a Literal mypy reads as str; pydantic (at runtime) as the registry's
    KindName = str
    PlatformName = str
else:
    KindName = Literal[KINDS]
    PlatformName = Literal[tuple(PLATFORMS)]


def protocol_of(kind: str) -> ProtocolSpec:
    """The protocol of a provider ``kind`` (``KeyError``: not a kind)."""
    return KIND_PROTOCOLS[kind]
