"""What the fake upstream does with one request: behaviours as plain, frozen data.

A behaviour says *what* a request should experience (a good answer, an HTTP error, a
cut stream, silence...); ``routing.simulator.play`` carries it out with aiohttp. Keeping
these as data means the same script can be built in a test, sent over the control API
(``to_dict`` / ``behaviour_from_dict``) or written in a preset.

Serialised form: ``{"kind": "<snake_case class name>", **fields}``; nested behaviours
(``Delay.then``, ``Flaky.fail`` / ``Flaky.ok``, ``When.then`` / ``When.otherwise``) serialise recursively. The one field
that would collide with the ``kind`` key, ``Malformed.kind``, travels as ``variant``:
``{"kind": "malformed", "variant": "sse-line"}``.

``{model}`` in any content or error message is replaced with the requested model
(plain substitution, not ``str.format``, so braces in content are safe).

Stream-only behaviours have a documented non-stream counterpart:

=================  ===============================  ======================================
behaviour          ``stream: true``                 ``stream: false``
=================  ===============================  ======================================
Reply              role, content xN, finish,        one ``chat.completion`` body
                   [usage], [DONE]
Empty              role, finish, [usage], [DONE]    body with ``content: ""``
NoDone             like Reply, no ``[DONE]``        like Reply
DropAfter          role, [reasoning], content xN,   headers + half the body, TCP cut
                   [a tool call begun], TCP cut
StallAfter         role, content xN, then silence   headers, then silence
UsageThenError     role, usage, SSE error event     HTTP 500 error body
StreamError        role, content xN, the wire's     HTTP ``status`` error of ``exception``
                   error event (Bedrock: an
                   exception frame)
Malformed("json")  every data line is garbage       200 with a body that is not JSON
Malformed("sse-    good 20-chunk answer, chunk 10   same as ``json``
line")             replaced by broken JSON
EndBeforeFinish    role, content xN, then the body  headers + half the body, then the same
                   ends (clean / reset / a broken   end (``clean``: a short body)
                   last line): no finish, no [DONE]
=================  ===============================  ======================================
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from routing.simulator.payloads import tool_specs

DEFAULT_CONTENT = "Hello from {model}."


@dataclass(frozen=True)
class Reply:
    """A good answer.

    ``content`` is split into ``chunks`` stream chunks (fewer when the text is shorter
    than that); ``chunk_delay_s`` is slept between content chunks (non-stream: once per
    gap, before the body). ``reasoning`` is sent first as one ``reasoning_content``
    delta; ``tool_call`` adds tool calls after the content, in the protocol's own shape:

    - ``True``: one ``get_weather({"city": "Paris"})`` call (set
      ``finish_reason="tool_calls"`` yourself if you want the realistic pairing);
    - ``{"name": "Bash", "arguments": {"command": "echo hi"}}``: that function call
      (``arguments`` an object or a JSON text);
    - ``{"name": "exec", "input": "ls -la"}``: a custom (freeform) tool call with one string
      input: a ``custom_tool_call`` item on the Responses wire, a chat ``custom`` tool
      call, and on the Messages wire a ``tool_use`` whose input is ``{"input": "..."}``;
    - a list of such objects: several calls, in order.

    With named calls (an object or a list) the answer finishes as a tool call
    (``tool_calls`` / ``tool_use``) unless ``finish_reason`` is set to something other
    than ``"stop"``.
    ``think_s``: a reasoning model whose reasoning is not streamed. A stream sends its
    headers and first event (role chunk, ``message_start``, ``response.created``) at once,
    then nothing for ``think_s``, then the rest; a JSON answer (whose headers come with
    it) waits ``think_s`` longer.
    ``cache_read`` / ``cache_write`` add prompt-cache tokens to the usage, in each
    protocol's fields (chat ``prompt_tokens_details.cached_tokens`` and
    ``cache_creation_input_tokens``; Anthropic ``cache_read_input_tokens`` /
    ``cache_creation_input_tokens``; Responses ``input_tokens_details.cached_tokens``).
    """

    content: str = DEFAULT_CONTENT
    chunks: int = 3
    chunk_delay_s: float = 0.0
    reasoning: str = ""
    tool_call: bool | dict[str, Any] | list[dict[str, Any]] = False
    usage: bool = True
    finish_reason: str = "stop"
    cache_read: int = 0
    cache_write: int = 0
    think_s: float = 0.0

    def __post_init__(self) -> None:
        tool_specs(self.tool_call)  # raises ValueError on a malformed script

    @property
    def finish(self) -> str:
        """The finish reason actually sent (named tool calls finish as ``tool_calls``)."""
        named = not isinstance(self.tool_call, bool) and bool(self.tool_call)
        return "tool_calls" if named and self.finish_reason == "stop" else self.finish_reason


@dataclass(frozen=True)
class Fail:
    """An HTTP error in OpenAI shape, or the raw ``body`` when given.

    ``type`` defaults by status (4xx ``invalid_request_error``, 429
    ``rate_limit_error``, 5xx ``server_error``); ``headers`` pass through as-is
    (``Retry-After``, ``retry-after-ms``...).
    """

    status: int = 500
    message: str = "upstream error"
    code: str | None = None
    type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before sending anything (headers included), then act as ``then``."""

    seconds: float
    then: Behaviour


@dataclass(frozen=True)
class Silent:
    """Accept the request and never answer; the handler ends when the client goes away."""


@dataclass(frozen=True)
class DropAfter:
    """Stream the role chunk and ``content`` in ``chunks`` chunks, then cut the TCP
    connection (no finish chunk, no ``[DONE]``, no chunked terminator).

    ``usage_first`` sends a usage-only chunk (``choices: []``) right after the role chunk.
    ``reasoning`` is sent before the content, as ``Reply`` sends it (with no content, the
    cut comes inside the reasoning). ``tool_call`` (as ``Reply.tool_call``) begins the
    first call after the content, every event of it but the last, so the cut comes inside
    a tool call that began.
    """

    chunks: int
    content: str = "Hello from {model}, cut short"
    usage_first: bool = False
    reasoning: str = ""
    tool_call: bool | dict[str, Any] | list[dict[str, Any]] = False

    def __post_init__(self) -> None:
        tool_specs(self.tool_call)  # raises ValueError on a malformed script


@dataclass(frozen=True)
class UsageThenError:
    """Stream role chunk, usage-only chunk, then ``data: {"error": ...}`` and a clean end
    (no ``[DONE]``). ``status_in_stream=False``: plain HTTP 500 instead."""

    status_in_stream: bool = True


@dataclass(frozen=True)
class StreamError:
    """Stream the preamble and ``content`` in ``chunks`` chunks (0: nothing, so the
    failure comes before the commit point), then the wire's in-stream failure — on Bedrock
    an exception frame of type ``exception`` carrying ``message`` — and a clean end.
    Non-stream: an HTTP ``status`` error of that type."""

    chunks: int = 0
    content: str = "Hello from {model}, then a failure"
    exception: str = "modelStreamErrorException"
    message: str = "The model stream failed."
    status: int = 424


@dataclass(frozen=True)
class StallAfter:
    """Stream the role chunk and ``content`` in ``chunks`` chunks, then stay silent with
    the connection open (exercises idle-between-chunks timeouts)."""

    chunks: int
    content: str = "Hello from {model}, then nothing"


@dataclass(frozen=True)
class Empty:
    """A normal, successful completion whose content is empty."""


@dataclass(frozen=True)
class Malformed:
    """Unparseable output.

    ``kind="json"``: a 200 whose body (non-stream) or every SSE data line (stream) is
    garbage, ending without ``[DONE]``. ``kind="sse-line"``: a good stream of ``chunks``
    content chunks ``"tok1 "``, ``"tok2 "``... in which content chunk number
    ``bad_chunk`` (1-based) is replaced by a truncated JSON line; everything else,
    including the finish chunk and ``[DONE]``, is fine. ``expected_content()`` is what
    a client that skips the bad line ends up with.
    """

    kind: str = "json"
    chunks: int = 20
    bad_chunk: int = 10

    def __post_init__(self) -> None:
        if self.kind not in ("json", "sse-line"):
            raise ValueError(f"Malformed.kind must be 'json' or 'sse-line', not {self.kind!r}")
        if not 1 <= self.bad_chunk <= self.chunks:
            raise ValueError("Malformed.bad_chunk must lie within 1..chunks")

    def pieces(self) -> list[str]:
        """The content chunks of the ``sse-line`` stream, the bad one included."""
        return [f"tok{i} " for i in range(1, self.chunks + 1)]

    def expected_content(self) -> str:
        """The ``sse-line`` content without the piece carried by the malformed line."""
        pieces = self.pieces()
        del pieces[self.bad_chunk - 1]
        return "".join(pieces)


@dataclass(frozen=True)
class NoDone:
    """A good stream (usage chunk included when requested) that ends without
    ``data: [DONE]``; the response still ends cleanly (chunked terminator)."""

    chunks: int = 3
    content: str = DEFAULT_CONTENT


@dataclass(frozen=True)
class EndBeforeFinish:
    """Stream the role chunk and ``content`` in ``chunks`` chunks, then end the body
    before any ``finish_reason`` (and without ``[DONE]``).

    ``how="clean"``: the response ends normally (chunked terminator), a clean close that
    looks like a finished body; ``"reset"``: the connection is reset (RST);
    ``"malformed"``: a truncated JSON line is the last thing before the clean end.
    """

    chunks: int = 2
    content: str = "Hello from {model}, ended early"
    how: str = "clean"

    def __post_init__(self) -> None:
        if self.how not in ("clean", "reset", "malformed"):
            raise ValueError(
                f"EndBeforeFinish.how must be 'clean', 'reset' or 'malformed', not {self.how!r}"
            )


@dataclass(frozen=True)
class KeyEcho:
    """Reject the request (401 ``invalid_api_key``, or ``status``) echoing the presented
    bearer key masked the way OpenAI does: ``Incorrect API key provided: sk-proj-ab12****9f3e``
    (its first 12 and last 4 characters). ``header``: echo that request header's value
    instead (a credential a provider takes in a header of its own)."""

    status: int = 401
    header: str = "Authorization"


@dataclass(frozen=True)
class Reset:
    """Close the TCP connection with a reset (SO_LINGER 0) and no response at all."""


@dataclass(frozen=True)
class ContextLength:
    """400 ``context_length_exceeded``, worded as OpenAI does."""


@dataclass(frozen=True)
class ContentFilter:
    """400 ``content_filter``: the provider refused the prompt for policy reasons."""


@dataclass(frozen=True)
class Flaky:
    """Fails ``every - 1`` of every ``every`` requests: ``fail`` then ``ok``.

    Requests for a model that resolve to a ``Flaky`` are numbered n = 1, 2, 3... (per
    model, reset by ``FakeUpstream.reset()``); request n behaves as ``ok`` when
    ``n % every == 0`` and as ``fail`` otherwise. ``Flaky(3, ...)``: fail, fail, ok,
    fail, fail, ok... so a gateway retrying twice in place always gets through.
    """

    every: int
    fail: Behaviour = field(default_factory=lambda: Fail(503, "simulated overload"))
    ok: Behaviour = field(default_factory=Reply)

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError("Flaky.every must be at least 1")

    def pick(self, n: int) -> Behaviour:
        """The behaviour for the n-th (1-based) request this model sent to a Flaky."""
        return self.ok if n % self.every == 0 else self.fail


@dataclass(frozen=True)
class When:
    """Choose by what the request carries: ``then`` when ``needle`` occurs in it, else
    ``otherwise``.

    ``scope="last"`` looks only at the last conversation item (the last of ``messages``
    or of ``input``, as compact JSON), so ``When('"tool_result"', Reply("done"),
    otherwise=Reply(tool_call={...}))`` answers a tool call first and text once the
    tool's result comes back, turn after turn (chat: ``'"role":"tool"'``, Responses:
    ``'"function_call_output"'``). ``scope="body"`` looks at the whole raw body.
    """

    needle: str
    then: Behaviour
    otherwise: Behaviour = field(default_factory=Reply)
    scope: str = "last"

    def __post_init__(self) -> None:
        if self.scope not in ("last", "body"):
            raise ValueError(f"When.scope must be 'last' or 'body', not {self.scope!r}")

    def pick(self, body: dict[str, Any], raw: bytes) -> Behaviour:
        if self.scope == "body":
            haystack = raw.decode(errors="replace")
        else:
            items = body.get("messages")
            if not isinstance(items, list):
                items = body.get("input")
            last = items[-1] if isinstance(items, list) and items else items
            haystack = json.dumps(last, separators=(",", ":"))
        return self.then if self.needle in haystack else self.otherwise


Behaviour: TypeAlias = (
    Reply
    | Fail
    | Delay
    | Silent
    | DropAfter
    | UsageThenError
    | StreamError
    | StallAfter
    | Empty
    | Malformed
    | NoDone
    | EndBeforeFinish
    | KeyEcho
    | Reset
    | ContextLength
    | ContentFilter
    | Flaky
    | When
)

_CLASSES: tuple[type[Any], ...] = (
    Reply,
    Fail,
    Delay,
    Silent,
    DropAfter,
    UsageThenError,
    StreamError,
    StallAfter,
    Empty,
    Malformed,
    NoDone,
    EndBeforeFinish,
    KeyEcho,
    Reset,
    ContextLength,
    ContentFilter,
    Flaky,
    When,
)


def _kind(cls: type[Any]) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


KINDS: dict[str, type[Any]] = {_kind(cls): cls for cls in _CLASSES}
_NESTED = {"then", "fail", "ok", "otherwise"}  # fields that hold a behaviour
_WIRE_NAME = {"kind": "variant"}  # field name -> key, where the field name is taken


def to_dict(behaviour: Behaviour) -> dict[str, Any]:
    """``{"kind": "<snake_case class name>", **fields}``, nested behaviours included."""
    out: dict[str, Any] = {"kind": _kind(type(behaviour))}
    for f in dataclasses.fields(behaviour):
        value = getattr(behaviour, f.name)
        out[_WIRE_NAME.get(f.name, f.name)] = to_dict(value) if f.name in _NESTED else value
    return out


def behaviour_from_dict(data: dict[str, Any]) -> Behaviour:
    """Inverse of ``to_dict``; raises ``ValueError`` on an unknown kind or field."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ValueError(f"a behaviour is an object with a string 'kind', got {data!r}")
    fields = dict(data)
    kind = fields.pop("kind")
    cls = KINDS.get(kind)
    if cls is None:
        raise ValueError(f"unknown behaviour kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    for name, key in _WIRE_NAME.items():
        if key in fields:
            fields[name] = fields.pop(key)
    for name in _NESTED & fields.keys():
        fields[name] = behaviour_from_dict(fields[name])
    try:
        behaviour: Behaviour = cls(**fields)
    except TypeError as exc:  # unknown or missing field
        raise ValueError(f"bad fields for {kind!r}: {exc}") from exc
    return behaviour
