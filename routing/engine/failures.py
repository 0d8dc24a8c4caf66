"""The failure taxonomy: every upstream outcome normalized to one :class:`FailureCode`.

Classification reads, in this order:

1. the HTTP status (``429`` is a rate limit whatever the body says);
2. structured error fields — ``code`` and ``type`` of an OpenAI-shaped
   ``{"error": {"message", "type", "code", "param"}}`` body (also ``{"error": "text"}``,
   ``{"message": ...}`` and ``{"detail": ...}``) — to refine ambiguous statuses
   (400/413/422) and to read status-less mid-stream error events;
   Google's ``{"error": {"code", "message", "status", "details"}}`` (Gemini, Vertex) is
   read by its ``status`` name and ``details`` first (:func:`_google`): SPEC §19's table;
3. the message text, only as a last resort and only for the few refinements that
   providers do not reliably expose as codes (context window, content policy,
   "model does not exist"). Each pattern is covered by the classification table in
   ``tests/engine/test_failures.py``.

Nothing here performs I/O or reads the clock: ``now`` is passed in.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

MESSAGE_LIMIT = 500


class FailureCode(StrEnum):
    """Why an attempt failed. The value equals the name (it is what config files list)."""

    RATE_LIMIT = "RATE_LIMIT"
    SERVER = "SERVER"
    TIMEOUT = "TIMEOUT"
    TRANSPORT = "TRANSPORT"
    EMPTY_RESPONSE = "EMPTY_RESPONSE"
    UNKNOWN_MODEL = "UNKNOWN_MODEL"
    AUTH = "AUTH"
    QUOTA = "QUOTA"
    FORBIDDEN = "FORBIDDEN"
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    BAD_REQUEST = "BAD_REQUEST"
    CONTENT_FILTER = "CONTENT_FILTER"
    ABORTED = "ABORTED"
    NO_PROVIDER = "NO_PROVIDER"
    MISSING_CREDENTIAL = "MISSING_CREDENTIAL"
    UNKNOWN = "UNKNOWN"


F = FailureCode

# TIMEOUT is deliberately absent: an upstream that stayed silent for a whole timeout
# rarely answers the next try, and retrying it multiplies the caller's wait.
DEFAULT_RETRY_CODES: frozenset[FailureCode] = frozenset(
    {F.EMPTY_RESPONSE, F.RATE_LIMIT, F.SERVER, F.TRANSPORT}
)
# A bad or refused request fails the same everywhere; an aborted call has nobody to answer.
DEFAULT_SWITCH_CODES: frozenset[FailureCode] = frozenset(FailureCode) - {
    F.ABORTED,
    F.BAD_REQUEST,
    F.CONTENT_FILTER,
}
# These say the provider's credential is broken: every target of that provider is affected.
CREDENTIAL_CODES: frozenset[FailureCode] = frozenset({F.AUTH, F.QUOTA, F.FORBIDDEN})
# The credential itself is broken: every target of the provider is disabled. FORBIDDEN is
# usually "this key may not use this model", so it disables that target only (SPEC §4).
PROVIDER_WIDE_CODES: frozenset[FailureCode] = frozenset({F.AUTH, F.QUOTA})


@dataclass(frozen=True, slots=True)
class Failure:
    """One classified failure. ``retry_after_s`` is the upstream's own wait hint, if any.

    ``message`` is the whole story, for the operator's log and the ledger; ``public`` is
    what a client may be told when the message holds more (the gateway's own view of the
    network: an internal address, an OS error), None when the message is fit for clients.
    """

    code: FailureCode
    message: str
    status: int | None = None
    retry_after_s: float | None = None
    public: str | None = None

    @property
    def client_message(self) -> str:
        """What a reply, an error event or a client-facing summary says of this failure."""
        return self.message if self.public is None else self.public


# --- Retry-After -------------------------------------------------------------------------


def _parse_seconds(value: str) -> float | None:
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) else None


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``retry-after``, else ``None``.

    ``retry-after-ms`` (OpenAI, Azure) is more precise, so it wins when it parses.
    ``retry-after`` may be delta-seconds or an HTTP-date, read relative to ``now``.
    A date in the past or a negative delta means "now" (0.0); garbage means no hint.
    """
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        ms = _parse_seconds(lowered["retry-after-ms"])
        if ms is not None:
            return max(0.0, ms / 1000.0)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _parse_seconds(raw)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" means UTC with unknown origin
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


# --- Reading error bodies --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fields:
    message: str
    tokens: frozenset[str]  # lower-cased ``code`` and ``type`` values
    numeric_code: int | None = None  # e.g. OpenRouter's {"error": {"code": 502}}
    google: str | None = None  # Google's status name (``RESOURCE_EXHAUSTED``…)
    reasons: frozenset[str] = frozenset()  # Google's ``details[].reason`` (``API_KEY_INVALID``)
    retry_delay_s: float | None = None  # Google's ``RetryInfo.retryDelay``


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Mapping) and "message" in value:
        return _text(value["message"])
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _fields_from_mapping(obj: Mapping[str, Any]) -> _Fields:
    inner = obj.get("error")
    if isinstance(inner, Mapping):
        obj = inner
    elif isinstance(inner, str) and inner.strip():
        return _fields(obj, message=inner.strip())
    message = _text(obj.get("message")) or _text(obj.get("detail"))
    fields = _fields(obj, message=message)
    status = obj.get("status")
    if isinstance(status, str) and status in _GOOGLE_CODES:
        return _google_fields(fields, status, obj.get("details"))
    return fields


def _google_fields(fields: _Fields, status: str, details: Any) -> _Fields:
    reasons: set[str] = set()
    delay: float | None = None
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, Mapping):
            continue
        if isinstance(detail.get("reason"), str):
            reasons.add(detail["reason"])
        raw = detail.get("retryDelay")
        if isinstance(raw, str) and raw.endswith("s"):
            delay = _parse_seconds(raw[:-1])
    return _Fields(
        fields.message, fields.tokens, fields.numeric_code, status, frozenset(reasons), delay
    )


def _fields(obj: Mapping[str, Any], *, message: str) -> _Fields:
    tokens: set[str] = set()
    numeric: int | None = None
    for key in ("code", "type"):
        value = obj.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            numeric = numeric if numeric is not None else int(value)
        elif isinstance(value, str) and value.strip():
            tokens.add(value.strip().lower())
    return _Fields(message=message, tokens=frozenset(tokens), numeric_code=numeric)


def _read_body(body: bytes | str | Mapping[str, Any] | None) -> _Fields:
    if body is None:
        return _Fields("", frozenset())
    if isinstance(body, Mapping):
        return _fields_from_mapping(body)
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(text)
    except ValueError:
        return _Fields(text.strip(), frozenset())
    if isinstance(parsed, Mapping):
        return _fields_from_mapping(parsed)
    return _Fields(text.strip(), frozenset())


# --- The decision table --------------------------------------------------------------------

_CONTEXT_TOKENS = frozenset({"context_length_exceeded"})
_FILTER_TOKENS = frozenset({"content_filter", "content_policy_violation"})
_QUOTA_TOKENS = frozenset(
    {
        "insufficient_quota",
        "billing_hard_limit_reached",
        "billing_not_active",
        "billing_error",
        "insufficient_balance",
        "payment_required",
    }
)
_AUTH_TOKENS = frozenset({"invalid_api_key", "authentication_error", "unauthorized"})
_FORBIDDEN_TOKENS = frozenset({"permission_error", "permission_denied", "forbidden"})
_MODEL_TOKENS = frozenset({"model_not_found", "not_found_error"})
_RATE_TOKENS = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "rate_limited", "too_many_requests"}
)
_SERVER_TOKENS = frozenset(
    {
        "server_error",
        "overloaded_error",
        "api_error",
        "internal_error",
        "internal_server_error",
        "service_unavailable",
        "bad_gateway",
    }
)
_BAD_REQUEST_TOKENS = frozenset({"invalid_request_error", "invalid_request", "bad_request"})

# Last-resort message patterns; every alternative is exercised by a test row.
_CONTEXT_TEXT = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long", re.I
)
_FILTER_TEXT = re.compile(
    r"content[ _-]?(policy|filter|management)|safety (system|policy|policies|filter|reasons)", re.I
)
_MODEL_TEXT = re.compile(r"\bmodel\b.*\b(does not exist|not found)|\bunknown model\b", re.I)


def _by_tokens(tokens: frozenset[str]) -> FailureCode | None:
    """Structured code/type fields, most specific first."""
    for group, code in (
        (_CONTEXT_TOKENS, F.CONTEXT_WINDOW_EXCEEDED),
        (_FILTER_TOKENS, F.CONTENT_FILTER),
        (_QUOTA_TOKENS, F.QUOTA),
        (_AUTH_TOKENS, F.AUTH),
        (_FORBIDDEN_TOKENS, F.FORBIDDEN),
        (_MODEL_TOKENS, F.UNKNOWN_MODEL),
        (_RATE_TOKENS, F.RATE_LIMIT),
        (_SERVER_TOKENS, F.SERVER),
    ):
        if tokens & group:
            return code
    return None


def _by_text(message: str) -> FailureCode | None:
    if _CONTEXT_TEXT.search(message):
        return F.CONTEXT_WINDOW_EXCEEDED
    if _FILTER_TEXT.search(message):
        return F.CONTENT_FILTER
    if _MODEL_TEXT.search(message):
        return F.UNKNOWN_MODEL
    return None


_BY_STATUS: dict[int, FailureCode] = {
    401: F.AUTH,
    402: F.QUOTA,
    403: F.FORBIDDEN,
    404: F.UNKNOWN_MODEL,
    429: F.RATE_LIMIT,
}


# Google's status names (google.rpc.Code), SPEC §19: a quota whose message says it is spent
# (billing, credits; and no RetryInfo saying when to come back) is QUOTA, else RATE_LIMIT.
_GOOGLE_CODES: dict[str, FailureCode] = {
    "RESOURCE_EXHAUSTED": F.RATE_LIMIT,
    "UNAVAILABLE": F.SERVER,
    "INTERNAL": F.SERVER,
    "UNKNOWN": F.SERVER,
    "DEADLINE_EXCEEDED": F.SERVER,
    "ABORTED": F.SERVER,
    "PERMISSION_DENIED": F.AUTH,
    "UNAUTHENTICATED": F.AUTH,
    "NOT_FOUND": F.UNKNOWN_MODEL,
    "INVALID_ARGUMENT": F.BAD_REQUEST,
    "OUT_OF_RANGE": F.BAD_REQUEST,
    "FAILED_PRECONDITION": F.FORBIDDEN,  # e.g. the API is not offered in the caller's region
    "CANCELLED": F.ABORTED,
}
_GOOGLE_AUTH_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "ACCESS_TOKEN_EXPIRED"})
_QUOTA_SPENT = re.compile(
    r"billing|credits?\b|prepay|spend(ing)? (cap|limit)|quota .*\bspent", re.I
)
_GOOGLE_CONTEXT = re.compile(r"exceeds the maximum number of tokens", re.I)


def _google(fields: _Fields) -> FailureCode:
    """Google's error by its status name and details, the message refining two of them."""
    code = _GOOGLE_CODES[fields.google or ""]
    if fields.reasons & _GOOGLE_AUTH_REASONS or "api key not valid" in fields.message.lower():
        return F.AUTH
    if code is F.RATE_LIMIT and fields.retry_delay_s is None:
        return F.QUOTA if _QUOTA_SPENT.search(fields.message) else code
    if code is F.BAD_REQUEST:
        if _GOOGLE_CONTEXT.search(fields.message):
            return F.CONTEXT_WINDOW_EXCEEDED
        return _by_text(fields.message) or code
    return code


def _classify(status: int | None, fields: _Fields) -> FailureCode:
    tokens = fields.tokens
    if status is not None and 200 <= status < 300:
        return F.UNKNOWN  # not a failure we can name; the caller asked anyway
    if fields.google is not None:
        return _google(fields)
    if "invalid_api_key" in tokens:
        return F.AUTH
    if status in (400, 429) and tokens & _QUOTA_TOKENS:
        return F.QUOTA
    if status is not None and 500 <= status <= 599:  # includes Anthropic's 529 "overloaded"
        return F.SERVER
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status in (400, 413, 422):
        token_code = _by_tokens(tokens)
        if token_code in (F.CONTEXT_WINDOW_EXCEEDED, F.CONTENT_FILTER):
            return token_code
        if status == 400 and token_code is F.UNKNOWN_MODEL:
            return token_code
        text_code = _by_text(fields.message)
        if text_code is F.UNKNOWN_MODEL and status != 400:
            text_code = None
        if text_code is not None:
            return text_code
        return F.CONTEXT_WINDOW_EXCEEDED if status == 413 else F.BAD_REQUEST
    # No status, or one without a rule: the fields decide, then the text, else UNKNOWN.
    code = _by_tokens(tokens) or _by_text(fields.message)
    if code is None and tokens & _BAD_REQUEST_TOKENS:
        code = F.BAD_REQUEST
    return code or F.UNKNOWN


def _message(fields: _Fields, status: int | None) -> str:
    message = fields.message.strip()[:MESSAGE_LIMIT]
    if message:
        return message
    return f"HTTP {status}" if status is not None else "upstream error"


def classify_http(
    status: int,
    body: bytes | str | Mapping[str, Any] | None,
    headers: Mapping[str, str],
    *,
    now: float,
) -> Failure:
    """Classify a non-2xx upstream HTTP response.

    ``Retry-After`` is kept on 429 and on 5xx (a 503 may carry it too); the planner
    decides whether to wait it out or switch now.
    """
    fields = _read_body(body)
    code = _classify(status, fields)
    retry_after = parse_retry_after(headers, now) if status == 429 or 500 <= status <= 599 else None
    if retry_after is None and code is F.RATE_LIMIT:
        retry_after = fields.retry_delay_s
    return Failure(
        code=code, message=_message(fields, status), status=status, retry_after_s=retry_after
    )


def classify_error_object(error: Mapping[str, Any] | str, status: int | None = None) -> Failure:
    """Classify an error that arrived inside a body, e.g. SSE ``data: {"error": {...}}``.

    Accepts the inner error object, the ``{"error": ...}`` wrapper, or bare text. When no
    ``status`` is given, a numeric ``code`` field in the HTTP range stands in for it
    (OpenRouter sends ``{"code": 502, ...}``); otherwise ``code``/``type`` decide.
    """
    fields = (
        _fields_from_mapping(error)
        if isinstance(error, Mapping)
        else _Fields(error.strip(), frozenset())
    )
    if status is None and fields.numeric_code is not None and 400 <= fields.numeric_code <= 599:
        status = fields.numeric_code
    return Failure(code=_classify(status, fields), message=_message(fields, status), status=status)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret of 4+ characters in ``text`` with ``[redacted]``.

    Longer secrets go first so a secret containing a shorter one is removed whole.
    Shorter strings are ignored: redacting them would mangle ordinary words.
    """
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return text


FRAGMENT_CHARS = 6  # SPEC §9: no run of 6+ characters of a secret may be shown or kept


class Redactor:
    """Removes every provider secret from upstream text, and any run of
    ``FRAGMENT_CHARS`` or more characters of one (upstreams echo keys masked:
    ``sk-proj-ab12****9f3e``). Built once per routing table from every provider's secret;
    calling it is a scan of 6-character windows against one set, so it is cheap enough for
    every failure message."""

    __slots__ = ("_grams", "_short")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s for s in secrets if s}
        n = FRAGMENT_CHARS
        self._grams = frozenset(s[i : i + n] for s in kept for i in range(len(s) - n + 1))
        self._short = [s for s in kept if 4 <= len(s) < n]  # whole only, like ``scrub``

    def __call__(self, text: str) -> str:
        if self._short:
            text = scrub(text, self._short)
        grams, n = self._grams, FRAGMENT_CHARS
        if not grams or len(text) < n:
            return text
        spans: list[tuple[int, int]] = []
        for i in range(len(text) - n + 1):
            if text[i : i + n] in grams:
                if spans and i <= spans[-1][1]:
                    spans[-1] = (spans[-1][0], i + n)
                else:
                    spans.append((i, i + n))
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in spans:
            out.append(text[last:start])
            out.append("[redacted]")
            last = end
        out.append(text[last:])
        return "".join(out)

    def failure(self, failure: Failure) -> Failure:
        message = self(failure.message)
        if message == failure.message:
            return failure
        return Failure(failure.code, message, failure.status, failure.retry_after_s)
