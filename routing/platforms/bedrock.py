"""Amazon Bedrock (SPEC §19): the ``anthropic`` kind through InvokeModel and
InvokeModelWithResponseStream, ``bedrock-converse`` through Converse and ConverseStream.

URLs: ``https://bedrock-runtime.{region}.amazonaws.com/model/{modelId}/invoke``,
``/invoke-with-response-stream``, ``/converse``, ``/converse-stream`` (``base_url``
replaces the host part: a VPC endpoint, a proxy, the simulator). The model id, an
inference profile id (``us.anthropic.…``, ``global.…``) or an ARN is one path segment,
URL-encoded (an ARN's ``/`` as ``%2F``; ``:`` as it is, :func:`model_segment`); SigV4
signs the path exactly as it is sent.

Bodies: an ``anthropic`` body loses ``model`` and ``stream`` (the URL says both) and gains
``anthropic_version: bedrock-2023-05-31``; the door's ``anthropic-beta`` header becomes the
body's ``anthropic_beta`` list. A Converse body is the codec's own
(``routing.protocols.converse``).

Authentication, with botocore (:class:`SigV4Signer`): SigV4 (service ``bedrock``, the
provider's region) with the provider's ``aws_access_key_id`` / ``aws_secret_access_key``
(/ ``aws_session_token``) when set, else botocore's credential chain (environment, shared
config and profiles, container and instance roles, web identity), resolved once per
pooled client in a thread; refreshable temporary credentials are refreshed in a thread,
one refresh at a time, so the event loop never waits on STS or a metadata service. Or a
Bedrock API key (``api_key``) as ``Authorization: Bearer``. No credential → an ``AUTH``
failure naming the provider and what to set.

Streams are AWS event-stream frames (:class:`EventStreamReader`, botocore's decoder),
handed on as the protocol's own SSE: an InvokeModel ``chunk`` frame's
``{"bytes": base64}`` is one Anthropic event; a ConverseStream frame becomes
``{"<eventType>": <payload>}``. An exception frame is a failure classified like an error
answer (:func:`classify_bedrock`), raised after the frames before it were handed on.

Errors: the type in ``x-amzn-errortype`` (or the body's ``__type``), the text in the
body's ``message``: ``ThrottlingException`` → ``RATE_LIMIT``; ``ServiceUnavailable`` /
``ModelNotReady`` / ``InternalServer`` / ``modelStreamError`` → ``SERVER``;
``AccessDenied`` / ``UnrecognizedClient`` / an invalid signature or expired token →
``AUTH``; ``ValidationException`` → the client's bad request (context window and content
filter refined by the text, as for every kind).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlsplit

import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials
from botocore.eventstream import EventStreamBuffer, ParserError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from botocore.session import Session

from routing.engine.failures import Failure, FailureCode, classify_http, parse_retry_after
from routing.platforms.base import Authenticator, PlatformSettings, PlatformSpec
from routing.protocols import Protocol
from routing.upstream.base import UpstreamFailure

if TYPE_CHECKING:
    from routing.protocols.registry import ProtocolSpec
    from routing.upstream.transport import UpstreamResponse

SERVICE = "bedrock"
ANTHROPIC_VERSION = "bedrock-2023-05-31"
_AUTH_ERRORS = frozenset(
    {
        "accessdeniedexception",
        "unrecognizedclientexception",
        "invalidsignatureexception",
        "incompletesignatureexception",
        "missingauthenticationtokenexception",
        "expiredtokenexception",
        "invalidclienttokenid",
        "signaturedoesnotmatch",
        "expiredtoken",
    }
)
_ERRORS: dict[str, tuple[FailureCode, int]] = {
    "throttlingexception": (FailureCode.RATE_LIMIT, 429),
    "toomanyrequestsexception": (FailureCode.RATE_LIMIT, 429),
    "servicequotaexceededexception": (FailureCode.RATE_LIMIT, 429),
    "serviceunavailableexception": (FailureCode.SERVER, 503),
    "modelnotreadyexception": (FailureCode.SERVER, 429),
    "internalserverexception": (FailureCode.SERVER, 500),
    "internalfailure": (FailureCode.SERVER, 500),
    "modelstreamerrorexception": (FailureCode.SERVER, 424),
    "modelerrorexception": (FailureCode.SERVER, 424),
    "modeltimeoutexception": (FailureCode.SERVER, 408),
    "resourcenotfoundexception": (FailureCode.UNKNOWN_MODEL, 404),
    "validationexception": (FailureCode.BAD_REQUEST, 400),
    **{name: (FailureCode.AUTH, 403) for name in _AUTH_ERRORS},
}


# The credential service (STS, the container or instance metadata) not answering: a blip
# that cools the target, not a credential to fix (AUTH would disable the provider).
_UNREACHABLE = (BotoConnectionError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError)

# A ValidationException about the target's model id (a typo, a model that needs an
# inference profile): the operator's configuration, so the call switches (UNKNOWN_MODEL)
# instead of failing every call to the group as the client's bad request.
_NOT_THIS_MODEL = re.compile(
    r"model identifier is invalid|on-demand throughput isn.t supported|inference profile",
    re.IGNORECASE,
)


# ------------------------------------------------------------------------------ errors
def error_type(headers: Mapping[str, str], body: Any) -> str:
    """Bedrock's error type: ``x-amzn-errortype`` (``ThrottlingException:http://…``) or
    the body's ``__type`` (``com.amazon…#ThrottlingException``), lower-cased; "" if none."""
    raw = ""
    for name, value in headers.items():
        if name.lower() == "x-amzn-errortype":
            raw = str(value)
            break
    if not raw and isinstance(body, Mapping):
        raw = str(body.get("__type") or body.get("code") or "")
    return raw.split(":", 1)[0].rsplit("#", 1)[-1].strip().lower()


def _message(body: Any) -> str:
    if isinstance(body, Mapping):
        for key in ("message", "Message", "originalMessage"):
            if isinstance(body.get(key), str) and body[key].strip():
                return str(body[key]).strip()
    return ""


def classify_bedrock(
    status: int | None,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float,
) -> Failure:
    """A Bedrock error answer (or an exception frame: ``status`` None, the type in
    ``headers``) in the one taxonomy (SPEC §19's table); a type it does not know falls back
    to :func:`classify_http`."""
    parsed: Any = body
    if isinstance(body, bytes | str):
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
    kind = error_type(headers, parsed)
    known = _ERRORS.get(kind)
    if known is None:
        return classify_http(status or 500, body, headers, now=now)
    code, usual = known
    message = _message(parsed) or kind
    if code is FailureCode.BAD_REQUEST and _NOT_THIS_MODEL.search(message):
        code = FailureCode.UNKNOWN_MODEL  # the target's model id, not the client's request
    elif code is FailureCode.BAD_REQUEST:  # the text refines it as for every kind
        code = classify_http(400, {"message": message}, {}, now=now).code
    retry_after = parse_retry_after(headers, now) if code is FailureCode.RATE_LIMIT else None
    return Failure(code, message[:500], status or usual, retry_after)


# -------------------------------------------------------------------------- the stream
class EventStreamReader:
    """A Bedrock stream's AWS event-stream frames, read through botocore's decoder and
    handed on as the protocol's SSE bytes (one ``read()`` per network read; ``b""`` at the
    end): an InvokeModel ``chunk`` frame as the Anthropic event it carries, any other
    event frame (ConverseStream's) as ``{"<eventType>": <payload>}``.

    An exception or error frame becomes ``UpstreamFailure``, raised once the events before
    it were handed out, as a cut is (its text is the upstream's: the attempt's reader
    scrubs it); a frame that fails its CRC is a ``TRANSPORT`` failure."""

    __slots__ = ("_inner", "_buffer", "_failure")

    def __init__(self, inner: Any) -> None:
        self._inner = inner  # anything with ``async read() -> bytes``
        self._buffer = EventStreamBuffer()
        self._failure: Failure | None = None

    async def read(self) -> bytes:
        while True:
            if self._failure is not None:
                raise UpstreamFailure(self._failure)
            data = await self._inner.read()
            if not data:
                return b""
            self._buffer.add_data(data)
            out = self._events()
            if out:
                return out
            # a read that completed no frame: read on (b"" would mean the end)

    def _events(self) -> bytes:
        out: list[bytes] = []
        try:
            for message in self._buffer:
                headers = cast(Mapping[str, Any], message.headers)  # stubs say int
                kind = headers.get(":message-type", "event")
                if kind != "event":
                    self._fail(kind, headers, message.payload)
                    break
                out.append(self._sse(str(headers.get(":event-type", "")), message.payload))
        except ParserError as exc:
            self._failure = Failure(
                FailureCode.TRANSPORT, f"malformed event-stream frame ({type(exc).__name__})"
            )
        return b"".join(out)

    def _fail(self, kind: str, headers: Mapping[str, Any], payload: bytes) -> None:
        if kind == "exception":
            name = str(headers.get(":exception-type", ""))
            failure = classify_bedrock(None, payload, {"x-amzn-errortype": name}, now=0.0)
        else:  # ":message-type: error": the code and message are headers
            name = str(headers.get(":error-code", ""))
            body = {"message": str(headers.get(":error-message", ""))}
            failure = classify_bedrock(None, body, {"x-amzn-errortype": name}, now=0.0)
        self._failure = failure

    def _sse(self, event_type: str, payload: bytes) -> bytes:
        if event_type != "chunk":
            data = b'{"' + event_type.encode() + b'":' + (payload or b"{}") + b"}"
            return b"event: " + event_type.encode() + b"\ndata: " + data + b"\n\n"
        try:
            data = base64.b64decode(orjson.loads(payload)["bytes"])
            if data.startswith(b'{"type":"'):  # Anthropic's events lead with their type
                name = data[9 : data.index(b'"', 9)]
            else:
                name = str(orjson.loads(data).get("type") or "message").encode()
        except (ValueError, KeyError, TypeError, AttributeError):  # JSON, base64, index
            return b"data: " + payload + b"\n\n"  # the decoder counts it malformed
        return b"event: " + name + b"\ndata: " + data + b"\n\n"


# ---------------------------------------------------------------------- authentication
class SigV4Signer:
    """Signs each request with SigV4 (botocore) for one provider: its explicit keys, or
    the credential chain resolved once. Refreshable credentials are refreshed off the
    event loop, one refresh at a time; a request signed meanwhile waits for it."""

    def __init__(self, provider: str, region: str, credentials: Credentials | None = None) -> None:
        self._provider = provider
        self._region = region
        self._credentials = credentials
        self._lock = asyncio.Lock()

    async def headers(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str]
    ) -> Mapping[str, str]:
        frozen = await self._frozen()
        content_type = headers.get("content-type", "application/json")
        signed_headers = {"content-type": content_type, "host": _host(url)}
        request = AWSRequest(method=method, url=url, data=body, headers=signed_headers)
        SigV4Auth(frozen, SERVICE, self._region).add_auth(request)
        signed = {
            "authorization": request.headers["Authorization"],
            "x-amz-date": request.headers["X-Amz-Date"],
        }
        if frozen.token:
            signed["x-amz-security-token"] = frozen.token
        return signed

    async def _frozen(self) -> Any:
        if self._due():
            async with self._lock:  # one resolution or refresh at a time, in a thread
                if self._due():  # not done by the one this call waited for
                    await asyncio.to_thread(self._current)
        assert self._credentials is not None
        return self._credentials.get_frozen_credentials()

    def _due(self) -> bool:
        credentials = self._credentials
        return credentials is None or (
            isinstance(credentials, RefreshableCredentials) and credentials.refresh_needed()
        )

    def _current(self) -> Credentials:
        """The credentials, resolved (the chain) or refreshed; runs in a thread."""
        try:
            credentials = self._credentials
            if credentials is None:
                credentials = Session().get_credentials()
                if credentials is None:
                    raise UpstreamFailure(Failure(FailureCode.AUTH, self._missing()))
                self._credentials = credentials
            credentials.get_frozen_credentials()  # refreshes a refreshable one when due
        except _UNREACHABLE as exc:  # STS or the metadata service did not answer: a blip
            message = (
                f"AWS credentials for provider {self._provider} could not be fetched "
                f"({type(exc).__name__}): the credential service did not answer"
            )
            raise UpstreamFailure(Failure(FailureCode.TRANSPORT, message)) from None
        except (BotoCoreError, ClientError) as exc:  # a profile, role or token refused
            message = (
                f"AWS credentials for provider {self._provider} could not be obtained "
                f"({type(exc).__name__}): check the AWS profile, role or web identity "
                "token, or set aws_access_key_id/aws_secret_access_key"
            )
            raise UpstreamFailure(Failure(FailureCode.AUTH, message)) from None
        return credentials

    def _missing(self) -> str:
        return (
            f"no AWS credentials found for provider {self._provider}: set "
            "aws_access_key_id/aws_secret_access_key, an api_key (a Bedrock API key) or "
            "the AWS environment (AWS_PROFILE, AWS_ACCESS_KEY_ID, a role)"
        )

    async def aclose(self) -> None:
        return None


@functools.lru_cache(maxsize=64)
def _host_of(scheme: str, netloc: str) -> str:
    default = {"https": ":443", "http": ":80"}.get(scheme, "")
    return netloc.removesuffix(default) if default else netloc


def _host(url: str) -> str:
    """The ``Host`` the HTTP client sends for ``url`` (its netloc, a default port
    dropped), given to the signer so botocore does not work it out again per request."""
    parts = urlsplit(url)
    return _host_of(parts.scheme, parts.netloc)


# ---------------------------------------------------------------------------- platform
def model_segment(model: str) -> str:
    """A model id, profile id or ARN as one path segment: ``/`` and anything else unsafe
    percent-encoded, ``:`` and ``@`` kept — the HTTP client (yarl) sends those two
    decoded whatever it is given, and SigV4 must sign the path exactly as it is sent."""
    return quote(model, safe=":@")


def _body_betas(headers: Mapping[str, str] | None) -> list[str]:
    for name, value in (headers or {}).items():
        if name.lower() == "anthropic-beta":
            return [beta.strip() for beta in value.split(",") if beta.strip()]
    return []


@dataclass(frozen=True, slots=True)
class BedrockPlatform(PlatformSpec):
    """Amazon Bedrock's runtime API (see the module docstring)."""

    def check(
        self, kind: str, base_url: str, api_key: str, settings: PlatformSettings
    ) -> dict[str, str]:
        errors = PlatformSpec.check(self, kind, base_url, api_key, settings)
        key, secret = settings.aws_access_key_id, settings.aws_secret_access_key
        if bool(key) != bool(secret):
            missing = "aws_secret_access_key" if key else "aws_access_key_id"
            errors[missing] = f"platform 'bedrock' needs {missing} with the other key"
        if settings.aws_session_token and not key:
            errors["aws_session_token"] = "a session token goes with aws_access_key_id"
        if key and api_key:
            errors["api_key"] = (
                "set either api_key (a Bedrock API key) or aws_access_key_id/"
                "aws_secret_access_key, not both"
            )
        return errors

    def schema_rules(self) -> list[dict[str, Any]]:
        """The keys :meth:`check` pairs: a key id with its secret, a session token with
        both (a value given: a string with something besides spaces)."""
        given = {"type": "string", "pattern": r"\S"}

        def needs(field: str, other: str) -> dict[str, Any]:
            return {
                "if": {"properties": {field: given}, "required": [field]},
                "then": {"properties": {other: given}, "required": [other]},
            }

        either = {  # a Bedrock API key or the AWS keys, not both
            "if": {"properties": {"aws_access_key_id": given}, "required": ["aws_access_key_id"]},
            "then": {"properties": {"api_key": {"not": given}}},
        }
        return [
            needs("aws_access_key_id", "aws_secret_access_key"),
            needs("aws_secret_access_key", "aws_access_key_id"),
            needs("aws_session_token", "aws_access_key_id"),
            either,
        ]

    @property
    def has_default_endpoint(self) -> bool:
        return True  # bedrock-runtime.{region}.amazonaws.com

    def default_base_url(self, protocol: ProtocolSpec, settings: PlatformSettings) -> str:
        return f"https://bedrock-runtime.{settings.region}.amazonaws.com"

    def endpoint_url(
        self, protocol: ProtocolSpec, base_url: str, model: str = "", stream: bool = False
    ) -> str:
        if protocol.kind is Protocol.MESSAGES:
            action = "invoke-with-response-stream" if stream else "invoke"
        else:
            action = "converse-stream" if stream else "converse"
        return f"{base_url.rstrip('/')}/model/{model_segment(model)}/{action}"

    def models_url(self, protocol: ProtocolSpec, base_url: str) -> str | None:
        return None  # the model list is the control plane's (bedrock.…), not the runtime's

    def count_tokens_url(self, protocol: ProtocolSpec, base_url: str, model: str) -> str | None:
        """CountTokens takes a bare foundation-model id: a cross-region profile's prefix is
        dropped; an ARN cannot be counted."""
        if protocol.kind is not Protocol.MESSAGES or model.startswith("arn:"):
            return None
        prefix, _, rest = model.partition(".")
        bare = rest if prefix in ("us", "eu", "apac", "jp", "au", "ca", "global") else model
        return f"{base_url.rstrip('/')}/model/{model_segment(bare)}/count-tokens"

    def count_tokens_body(self, protocol: ProtocolSpec, body: bytes) -> bytes:
        """CountTokens wraps the InvokeModel body: ``{"input": {"invokeModel": {"body":
        base64}}}``."""
        prepared = self.prepare_body(protocol, body, "", False)
        wrapped = {"input": {"invokeModel": {"body": base64.b64encode(prepared).decode()}}}
        return orjson.dumps(wrapped)

    def count_tokens_answer(self, payload: bytes) -> bytes:
        """``{"inputTokens": n}`` as Anthropic's ``{"input_tokens": n}``."""
        try:
            count = orjson.loads(payload).get("inputTokens")
        except (orjson.JSONDecodeError, AttributeError):
            return payload
        return orjson.dumps({"input_tokens": count}) if isinstance(count, int) else payload

    def prepare_body(self, protocol: ProtocolSpec, body: bytes, model: str, stream: bool) -> bytes:
        if protocol.kind is not Protocol.MESSAGES:
            return body
        parsed = orjson.loads(body)
        parsed.pop("model", None)
        parsed.pop("stream", None)
        parsed["anthropic_version"] = ANTHROPIC_VERSION
        return orjson.dumps(parsed)

    def headers_into_body(
        self, protocol: ProtocolSpec, body: bytes, headers: Mapping[str, str] | None
    ) -> tuple[bytes, Mapping[str, str] | None]:
        """The client's ``anthropic-beta`` header as the body's ``anthropic_beta`` list
        (Bedrock reads betas there), and the headers without it."""
        betas = _body_betas(headers)
        if protocol.kind is not Protocol.MESSAGES or not betas:
            return body, headers
        rest = {k: v for k, v in (headers or {}).items() if k.lower() != "anthropic-beta"}
        if b'"anthropic_beta"' not in body and body.endswith(b"}") and len(body) > 2:
            # the usual case: appended to the object, not parsed again (a long
            # conversation's body costs ~70 µs a parse and dump)
            return body[:-1] + b',"anthropic_beta":' + orjson.dumps(betas) + b"}", rest
        parsed = orjson.loads(body)
        kept = parsed.get("anthropic_beta")
        parsed["anthropic_beta"] = list(dict.fromkeys([*(kept or ()), *betas]))
        return orjson.dumps(parsed), rest

    def auth_headers(self, protocol: ProtocolSpec, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}  # a Bedrock API key

    def authenticator(
        self,
        provider: str,
        protocol: ProtocolSpec,
        api_key: str,
        settings: PlatformSettings,
        clock: Callable[[], float],
    ) -> Authenticator | None:
        key, secret = settings.aws_access_key_id, settings.aws_secret_access_key
        if key and secret:
            explicit = Credentials(key, secret, settings.aws_session_token or None)
            return SigV4Signer(provider, settings.region, explicit)
        if api_key:
            return None  # the Bedrock API key alone (``auth_headers``)
        return SigV4Signer(provider, settings.region)

    def reader(self, response: UpstreamResponse) -> EventStreamReader:
        return EventStreamReader(response.reader())


BEDROCK = BedrockPlatform(
    "bedrock",
    "Amazon Bedrock (InvokeModel, Converse; SigV4 or a Bedrock API key)",
    frozenset({Protocol.MESSAGES, Protocol.CONVERSE}),
    classify=classify_bedrock,
    fields=("region", "aws_access_key_id", "aws_secret_access_key", "aws_session_token"),
    required=("region",),
    model_in_url=True,
    region_pattern=r"[a-z]{2}(-[a-z]+)+-\d+",  # us-east-1, ap-southeast-2, us-gov-west-1
)
