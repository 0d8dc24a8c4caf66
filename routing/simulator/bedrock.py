"""Amazon Bedrock's runtime API for the simulator, written apart from the gateway's
platform (``routing.platforms.bedrock``) so tests compare two implementations.

Paths: ``/model/{modelId}/invoke`` and ``/invoke-with-response-stream`` (Anthropic
Messages bodies without ``model``/``stream``, ``anthropic_version`` in the body) and
``/converse`` / ``/converse-stream`` (Converse shapes, :class:`ConverseWire`); the model id
is the path's, URL-decoded. Streams are AWS event-stream frames encoded here (prelude,
string headers, payload, two CRC32s): an InvokeModel event is a ``chunk`` frame whose
``{"bytes": base64}`` holds one Anthropic event; a Converse event is a frame named by its
``:event-type``; a failure is an exception frame (``:message-type: exception``).

Authentication (:func:`auth_failure`): with ``aws_keys`` configured, SigV4 is checked by
recomputing the signature with botocore from the request as received and the key's
secret (an unknown key: 403 ``UnrecognizedClientException``; a wrong signature: 403
``InvalidSignatureException``, as AWS answers); a Bedrock API key is ``Authorization:
Bearer <api_key>``. Errors are ``{"message"}`` bodies with the type in
``x-amzn-ErrorType``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from routing.simulator.payloads import ToolSpec

Event = tuple[str | None, dict[str, Any]]
ACTIONS = ("invoke", "invoke-with-response-stream", "converse", "converse-stream", "count-tokens")
STREAMS = ("invoke-with-response-stream", "converse-stream")
EXCEPTION = ":exception:"  # an event name that asks for an exception frame
ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def model_and_action(path: str) -> tuple[str, str] | None:
    """The model id a Bedrock path names (decoded; an ARN's ``/`` whether encoded or not)
    and its action; None: not Bedrock's."""
    path = path.split("?", 1)[0]
    if not path.startswith("/model/"):
        return None
    head, _, action = path.rpartition("/")
    model = head[len("/model/") :]
    if action not in ACTIONS or not model:
        return None
    return unquote(model), action


# -------------------------------------------------------------------------- frames
def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack("!B", len(raw_name))
        + raw_name
        + b"\x07"  # string
        + struct.pack("!H", len(raw_value))
        + raw_value
    )


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total and headers lengths, their CRC32),
    headers, payload, the message's CRC32."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", binascii.crc32(body))


def event_frame(event_type: str, payload: bytes) -> bytes:
    headers = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return frame(headers, payload)


def chunk_frame(anthropic_event: bytes) -> bytes:
    """InvokeModelWithResponseStream's frame for one Anthropic event."""
    payload = b'{"bytes":"' + base64.b64encode(anthropic_event) + b'"}'
    return event_frame("chunk", payload)


def exception_frame(exception: str, message: str) -> bytes:
    headers = {
        ":exception-type": exception,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps({"message": message}).encode())


def encode(action: str, name: str | None, data: str) -> bytes:
    """A stream event the way ``action`` frames it (``name`` ``:exception:<type>``: an
    exception frame whose message is ``data``'s)."""
    if name is not None and name.startswith(EXCEPTION):
        try:
            message = str(json.loads(data).get("message", data))
        except ValueError:
            message = data
        return exception_frame(name.removeprefix(EXCEPTION), message)
    if action == "converse-stream":
        return event_frame(name or "message", data.encode())
    return chunk_frame(data.encode())


def exception_events(exception: str, message: str) -> list[Event]:
    return [(EXCEPTION + exception, {"message": message})]


def error_type(status: int, type_: str | None) -> str:
    """The ``x-amzn-ErrorType`` of an error answer: the script's type when it names an
    AWS exception, else the status's usual one."""
    if type_ and type_[0].isupper() and type_.endswith(("Exception", "Error")):
        return type_
    return ERROR_TYPES.get(
        status, "InternalServerException" if status >= 500 else "ValidationException"
    )


def error_headers(status: int, type_: str | None) -> dict[str, str]:
    kind = error_type(status, type_)
    return {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"}


def invalid_body(action: str, body: dict[str, Any] | None) -> str | None:
    """Bedrock's 400 for a body it refuses: not JSON, an InvokeModel body naming a
    ``model`` or ``stream`` or lacking its ``anthropic_version`` (Bedrock refuses
    extraneous keys), a Converse body without ``messages``."""
    if body is None:
        return "Malformed input request, please reformat your input and try again."
    if action.startswith("converse"):
        return None if isinstance(body.get("messages"), list) else "messages is required"
    if "input" in body and "invokeModel" in (body.get("input") or {}):  # CountTokens
        try:
            inner = json.loads(base64.b64decode(body["input"]["invokeModel"]["body"]))
        except (ValueError, TypeError, KeyError):
            return "input.invokeModel.body is not a base64 JSON body"
        return invalid_body("invoke", inner if isinstance(inner, dict) else None)
    for key in ("model", "stream"):
        if key in body:
            return f"extraneous key [{key}] is not permitted"
    if body.get("anthropic_version") != "bedrock-2023-05-31":
        return "anthropic_version: bedrock-2023-05-31 is required"
    return None


def count_tokens(body: dict[str, Any]) -> int:
    """A CountTokens answer's count: a word a token, like every simulated usage."""
    inner = json.loads(base64.b64decode(body["input"]["invokeModel"]["body"]))
    words = 0
    for message in inner.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            words += len(content.split())
        else:
            words += sum(len(str(b.get("text", "")).split()) for b in content or ())
    return max(words, 1)


# ------------------------------------------------------------------------------- auth
def _forbidden(kind: str, message: str) -> tuple[int, str, str]:
    return 403, kind, message


def auth_failure(
    method: str,
    raw_path: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    aws_keys: Mapping[str, str] | None,
    api_key: str | None,
) -> tuple[int, str, str] | None:
    """(status, error type, message) when the request is not authenticated; None when it
    is (or when the simulator was given no credentials to check)."""
    if not aws_keys and api_key is None:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    header = lowered.get("authorization", "")
    if header.startswith("Bearer "):
        if api_key is not None and hmac.compare_digest(header[7:].strip(), api_key):
            return None
        return _forbidden("UnrecognizedClientException", "Invalid API Key format or value.")
    if not header.startswith("AWS4-HMAC-SHA256 ") or not aws_keys:
        return _forbidden("MissingAuthenticationTokenException", "Missing Authentication Token")
    fields = dict(part.strip().split("=", 1) for part in header[17:].split(",") if "=" in part)
    scope = fields.get("Credential", "").split("/")
    if len(scope) != 5 or scope[0] not in aws_keys:
        return _forbidden(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    if not hmac.compare_digest(
        _signature(method, raw_path, lowered, body, fields, scope, aws_keys[scope[0]]),
        fields.get("Signature", ""),
    ):
        return _forbidden(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.",
        )
    return None


def _signature(
    method: str,
    raw_path: str,
    headers: Mapping[str, str],
    body: bytes,
    fields: Mapping[str, str],
    scope: Sequence[str],
    secret: str,
) -> str:
    """The SigV4 signature botocore computes for the request as received."""
    names = fields.get("SignedHeaders", "").split(";")
    signed = {name: headers.get(name, "") for name in names}
    url = f"http://{signed.get('host') or headers.get('host', '')}{raw_path}"
    request = AWSRequest(method=method, url=url, data=body, headers=signed)
    request.context["timestamp"] = headers.get("x-amz-date", "")
    token = headers.get("x-amz-security-token")
    auth = SigV4Auth(Credentials(scope[0], secret, token), scope[3], scope[2])
    canonical = auth.canonical_request(request)
    return str(auth.signature(auth.string_to_sign(request, canonical), request))


# -------------------------------------------------------------------------- converse
def _converse_usage(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    read = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    prompt, output = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    out = {
        "inputTokens": prompt - read - write,
        "outputTokens": output,
        "totalTokens": prompt + output,
    }
    if read:
        out["cacheReadInputTokens"] = read
    if write:
        out["cacheWriteInputTokens"] = write
    return out


class ConverseWire:
    """Amazon Bedrock Converse (ConverseStream events by name, JSON answers)."""

    done = False

    def __init__(self, model: str, *, include_usage: bool = True) -> None:
        self.model = model
        self.id = uuid.uuid4().hex[:12]
        self._index = -1
        self._block: str | None = None

    def _open(self, kind: str, start: dict[str, Any] | None = None) -> list[Event]:
        events = self._close()
        self._index += 1
        self._block = kind
        if start is not None:
            payload = {"contentBlockIndex": self._index, "start": start}
            events.append(("contentBlockStart", payload))
        return events

    def _close(self) -> list[Event]:
        if self._block is None:
            return []
        self._block = None
        return [("contentBlockStop", {"contentBlockIndex": self._index})]

    def _delta(self, delta: dict[str, Any]) -> Event:
        return ("contentBlockDelta", {"contentBlockIndex": self._index, "delta": delta})

    def preamble(self) -> list[Event]:
        return [("messageStart", {"role": "assistant"})]

    def reasoning(self, text: str) -> list[Event]:
        events = self._open("reasoning")
        events.append(self._delta({"reasoningContent": {"text": text}}))
        events.append(self._delta({"reasoningContent": {"signature": "sim-signature"}}))
        return events

    def content(self, piece: str) -> list[Event]:
        events = [] if self._block == "text" else self._open("text")
        return [*events, self._delta({"text": piece})]

    def tool_call(self, spec: ToolSpec, index: int) -> list[Event]:
        start = {"toolUse": {"toolUseId": f"tooluse_{self.id}_{index}", "name": spec.name}}
        events = self._open("tool", start)
        text = json.dumps(spec.input_object)
        half = len(text) // 2
        events += [self._delta({"toolUse": {"input": part}}) for part in (text[:half], text[half:])]
        return events

    def finish(self, reason: str, usage: dict[str, int] | None) -> list[Event]:
        return [
            *self._close(),
            ("messageStop", {"stopReason": STOP.get(reason, reason)}),
            ("metadata", {"usage": _converse_usage(usage), "metrics": {"latencyMs": 1}}),
        ]

    def usage_only(self, usage: dict[str, int]) -> list[Event]:
        return []  # Converse reports usage last, in ``metadata``

    def stream_error(self) -> list[Event]:
        return exception_events("modelStreamErrorException", "The model stream failed.")

    def body(
        self,
        *,
        content: str,
        reasoning: str = "",
        tool_calls: Sequence[ToolSpec] = (),
        finish_reason: str = "stop",
        usage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        blocks: list[dict[str, Any]] = []
        if reasoning:
            text = {"text": reasoning, "signature": "sim-signature"}
            blocks.append({"reasoningContent": {"reasoningText": text}})
        if content:
            blocks.append({"text": content})
        for index, spec in enumerate(tool_calls):
            use = {"toolUseId": f"tooluse_{self.id}_{index}", "name": spec.name}
            blocks.append({"toolUse": {**use, "input": spec.input_object}})
        return {
            "output": {"message": {"role": "assistant", "content": blocks}},
            "stopReason": STOP.get(finish_reason, finish_reason),
            "usage": _converse_usage(usage),
            "metrics": {"latencyMs": 1},
        }

    def error(
        self, message: str, type_: str | None, code: str | None, status: int
    ) -> dict[str, Any]:
        return {"message": message}
