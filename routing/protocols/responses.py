"""OpenAI Responses <-> the canonical (Chat Completions) view.

Requests: ``to_canonical`` (the ``/v1/responses`` door's body: ``input`` as a string or
items, ``instructions``, function tools, ``reasoning``) and ``from_canonical`` (the body an
``openai-responses`` target gets, always ``store: false``). Answers and streams as in
``messages``; ``StreamEncoder`` emits the standard event sequence with ``sequence_number``.

The gateway is stateless here (SPEC §12): ``previous_response_id`` and
``conversation`` are refused with a message saying to send the conversation in ``input``;
``store`` is answered as false. Hosted tools (web/file search, code interpreter, MCP…)
and item types other than messages, function calls/outputs and reasoning are refused
when the target would need a translation. Top-level fields follow ``DOOR_FIELDS`` and
``TARGET_FIELDS`` (``routing.protocols.fields``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from routing.protocols import Unmappable
from routing.protocols.canonical import (
    OPAQUE,
    chat_usage,
    chunk,
    completion,
    message_text,
    usage_chunk,
)
from routing.protocols.fields import (
    CHAT_ONLY,
    DROPPED,
    MAPPED,
    Table,
    check,
    is_false,
    mapped_parts,
    refused,
)
from routing.protocols.responses_tools import (
    HOSTED_ITEMS,
    HostedTools,
    ToolNames,
    call_item,
    custom_arguments,
    custom_input,
    flat_name,
    tools_in,
)

_SAME = ("temperature", "top_p", "stream", "parallel_tool_calls")

# The Responses door's fields on a translated leg (``routing.protocols.fields``).
DOOR_FIELDS: Table = {
    **dict.fromkeys(
        (
            "model",
            "input",
            "instructions",
            "stream",
            "temperature",
            "top_p",
            "parallel_tool_calls",
            "max_output_tokens",
            "tools",
            "tool_choice",
            "user",
            "store",  # answered as false: noted when true
        ),
        MAPPED,
    ),
    # Summaries are what the door streams of any target's reasoning.
    "reasoning": mapped_parts(dict.fromkeys(("effort", "summary", "generate_summary"), MAPPED)),
    "text": mapped_parts({"format": MAPPED, "verbosity": DROPPED}),
    "background": refused("a background response the gateway would have to keep", is_false),
    "prompt": refused("a prompt template stored at the provider"),
    "top_logprobs": refused("log probabilities", harmless=lambda v: v == 0),
    # Refused whatever the target by ``refuse_stored``; here for the table's completeness.
    "previous_response_id": refused("a response stored at the provider"),
    "conversation": refused("a conversation stored at the provider"),
    # Caching, placement and tier hints, metadata, server-side compaction, and a cap on
    # hosted-tool calls (a translated request cannot carry hosted tools).
    **dict.fromkeys(
        (
            "include",
            "metadata",
            "max_tool_calls",
            "prompt_cache_key",
            "prompt_cache_retention",
            "prompt_cache_options",
            "safety_identifier",
            "service_tier",
            "stream_options",
            "truncation",
            "context_management",
        ),
        DROPPED,
    ),
}
DOOR_TARGETS = "targets of another kind than openai-responses"
STATELESS = (
    "Switchyard keeps no responses: send the whole conversation in 'input' (with "
    "'store': false) instead of '{field}'."
)


def refuse_stored(body: dict[str, Any]) -> None:
    """The door's check, whatever the target: stored state is refused clearly."""
    for name in ("previous_response_id", "conversation"):
        if body.get(name):
            raise Unmappable(STATELESS.format(field=name), param=name)


# Input items that carry nothing for a translated leg: the tools of ``additional_tools``
# are read with ``tools`` (``responses_tools``); a ``configuration_update`` (Codex: the
# reasoning effort it switched to) is already in the request's own fields.
_SKIPPED_ITEMS = ("additional_tools", "configuration_update")


# --------------------------------------------------------------------------- requests in
def to_canonical(
    body: dict[str, Any], hosted: HostedTools = HostedTools.DROP
) -> tuple[dict[str, Any], list[str]]:
    refuse_stored(body)
    notes = check(DOOR_FIELDS, body, target=DOOR_TARGETS)
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        pending_reasoning: list[str] = []
        hosted_calls: list[str] = []
        for i, item in enumerate(items):
            kind = item.get("type") if isinstance(item, dict) else None
            if kind in HOSTED_ITEMS:  # a hosted tool's call or result in history
                if hosted is HostedTools.SKIP:
                    raise Unmappable(
                        f"'input[{i}]' is a '{kind}' item, which only openai-responses "
                        "targets accept.",
                        param="input",
                    )
                if kind not in hosted_calls:
                    hosted_calls.append(kind)
                continue
            _item_in(item, f"input[{i}]", messages, pending_reasoning)
        notes += [f"dropped input {kind} items" for kind in hosted_calls]
    else:
        raise Unmappable("'input' must be a string or an array of items.", param="input")
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    for name in _SAME:
        if name in body:
            out[name] = body[name]
    if body.get("stream"):
        out["stream_options"] = {"include_usage": True}
    if body.get("max_output_tokens"):
        out["max_tokens"] = body["max_output_tokens"]
    tools, dropped = tools_in(body, hosted)
    if tools:
        out["tools"] = tools
    notes += dropped
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        out["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        name = flat_name(str(choice.get("name") or ""), choice.get("namespace"))
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        out["reasoning_effort"] = reasoning["effort"]
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    if body.get("user"):
        out["user"] = body["user"]
    if body.get("store"):
        notes.append("store ignored (the gateway is stateless)")
    return out, notes


def _content_in(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Unmappable(f"'{where}.content' must be a string or an array.", param="input")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        else:
            raise Unmappable(
                f"'{where}.content[{j}]' is a '{kind}' part, which only openai-responses "
                "targets accept.",
                param="input",
            )
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _item_in(
    item: Any, where: str, messages: list[dict[str, Any]], pending_reasoning: list[str]
) -> None:
    if not isinstance(item, dict):
        raise Unmappable(f"'{where}' must be an object.", param="input")
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise Unmappable(
                f"'{where}.role' must be user, assistant, system or developer.", param="input"
            )
        message: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _content_in(item.get("content"), where),
        }
        if role == "assistant" and pending_reasoning:
            message["reasoning_content"] = "".join(pending_reasoning)
            pending_reasoning.clear()
        messages.append(message)
    elif kind in ("function_call", "custom_tool_call"):
        name = flat_name(str(item.get("name") or ""), item.get("namespace"))
        arguments = (
            custom_arguments(item.get("input"))
            if kind == "custom_tool_call"
            else item.get("arguments") or "{}"
        )
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and not _after_tools(messages):
            last.setdefault("tool_calls", []).append(call)
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            if pending_reasoning:
                message["reasoning_content"] = "".join(pending_reasoning)
                pending_reasoning.clear()
            messages.append(message)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        text = output if isinstance(output, str) else message_text(_content_in(output, where))
        messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    elif kind == "reasoning":
        summary = item.get("summary") or []
        text = "".join(str(s.get("text", "")) for s in summary if isinstance(s, dict))
        if not text:
            text = "".join(
                str(c.get("text", "")) for c in item.get("content") or () if isinstance(c, dict)
            )
        if text:
            pending_reasoning.append(text)
    elif kind in _SKIPPED_ITEMS:
        return
    else:
        raise Unmappable(
            f"'{where}' is a '{kind}' item, which only openai-responses targets accept.",
            param="input",
        )


def _after_tools(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and messages[-1]["role"] == "tool"


# -------------------------------------------------------------------------- requests out
# Chat fields an openai-responses target takes under the same name.
_COPIED = (
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
)

# A canonical (chat) request's fields on the way to an ``openai-responses`` target.
TARGET_FIELDS: Table = {
    **dict.fromkeys(
        (
            "model",
            "messages",
            "max_tokens",
            "max_completion_tokens",
            "stream",
            "stream_options",  # usage: Responses streams always carry it
            "temperature",
            "top_p",
            "parallel_tool_calls",
            "tools",
            "tool_choice",
            "reasoning_effort",
            "response_format",
            "verbosity",
            "user",
            *_COPIED,
        ),
        MAPPED,
    ),
    **CHAT_ONLY,
    **dict.fromkeys(
        (
            "stop",
            "frequency_penalty",
            "presence_penalty",
            "seed",
            "logit_bias",
            "store",  # the gateway sends store: false
            "prediction",  # a latency hint: the answer is the same without it
        ),
        DROPPED,
    ),
}


def from_canonical(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    notes = check(TARGET_FIELDS, body, target="openai-responses targets")
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    dropped_reasoning = False
    for message in body.get("messages") or ():
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer") and items:
            # Mid-conversation (Claude Code's Agent tool): in place, as a developer item.
            items.append(
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": message_text(content)}],
                }
            )
        elif role in ("system", "developer"):
            instructions.append(message_text(content))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": message_text(content),
                }
            )
        elif role == "assistant":
            dropped_reasoning = dropped_reasoning or bool(message.get("reasoning_content"))
            text = message_text(content)
            if text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }
                )
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        else:
            items.append({"type": "message", "role": "user", "content": _parts_out(content)})
    if dropped_reasoning:
        notes.append("dropped reasoning from history (Responses needs its own reasoning items)")
    out: dict[str, Any] = {"model": model, "input": items, "store": False}
    if instructions:
        out["instructions"] = "\n\n".join(i for i in instructions if i)
    for name in _SAME:
        if name in body:
            out[name] = body[name]
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens:
        out["max_output_tokens"] = max_tokens
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool_out(tool, i) for i, tool in enumerate(tools)]
    choice = body.get("tool_choice")
    if isinstance(choice, str):
        out["tool_choice"] = choice
    elif isinstance(choice, dict):
        out["tool_choice"] = {
            "type": "function",
            "name": (choice.get("function") or {}).get("name"),
        }
    if body.get("reasoning_effort"):
        out["reasoning"] = {"effort": body["reasoning_effort"], "summary": "auto"}
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["text"] = {"format": {"type": "json_schema", **(fmt.get("json_schema") or {})}}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["text"] = {"format": {"type": "json_object"}}
    if body.get("verbosity"):
        out["text"] = {**out.get("text", {}), "verbosity": body["verbosity"]}
    if body.get("user"):
        out["user"] = body["user"]
    for name in _COPIED:
        if body.get(name) is not None:
            out[name] = body[name]
    return out, notes


def _parts_out(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content or ():
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            parts.append({"type": "input_image", "image_url": url})
        else:
            raise Unmappable(
                f"a '{kind}' content part has no counterpart on openai-responses targets.",
                param="messages",
            )
    return parts


def _tool_out(tool: dict[str, Any], index: int) -> dict[str, Any]:
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict):
        raise Unmappable(f"tools[{index}] is not a function tool.", param="tools")
    out: dict[str, Any] = {
        "type": "function",
        "name": function.get("name"),
        "parameters": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    if "strict" in function:
        out["strict"] = function["strict"]
    return out


# ------------------------------------------------------------------------------ answers
def _usage_in(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if not usage:
        return None
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    out = chat_usage(
        input_tokens=int(usage.get("input_tokens") or 0) - cached,
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read=cached,
    )
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    if reasoning:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def _usage_out(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    output = int(usage.get("completion_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output,
    }


def _finish_from(response: dict[str, Any], has_calls: bool) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return "content_filter" if reason == "content_filter" else "length"
    return "tool_calls" if has_calls else "stop"


def _call_in(item: dict[str, Any], arguments: str | None = None) -> dict[str, Any]:
    """A ``function_call`` / ``custom_tool_call`` output item as a canonical tool call."""
    if arguments is None:
        arguments = (
            custom_arguments(item.get("input"))
            if item.get("type") == "custom_tool_call"
            else item.get("arguments") or ""
        )
    return {
        "id": item.get("call_id"),
        "type": "function",
        "function": {
            "name": flat_name(str(item.get("name") or ""), item.get("namespace")),
            "arguments": arguments,
        },
    }


def completion_to_canonical(body: dict[str, Any]) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    opaque: list[str] = []  # hosted tool calls, compaction…: content all the same
    for item in body.get("output") or ():
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text", "")))
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    texts.append(str(part.get("refusal", "")))
        elif kind == "reasoning":
            for part in item.get("summary") or ():
                reasoning.append(str(part.get("text", "")))
            for part in item.get("content") or ():
                reasoning.append(str(part.get("text", "")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(_call_in(item))
        elif isinstance(kind, str):
            opaque.append(kind)
    out = completion(
        id_=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        content="".join(texts) or None,
        reasoning="".join(reasoning),
        tool_calls=calls,
        finish_reason=_finish_from(body, bool(calls)),
        usage=_usage_in(body.get("usage")),
    )
    if opaque:
        out["choices"][0]["message"][OPAQUE] = opaque
    return out


def _ids() -> str:
    return uuid.uuid4().hex[:24]


def _response(
    id_: str, model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": id_,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": None,
        "top_p": None,
        "metadata": {},
        "store": False,
        "usage": _usage_out(usage) if usage is not None else None,
    }


def _message_item(text: str, id_: str | None = None, status: str = "completed") -> dict[str, Any]:
    return {
        "id": id_ or f"msg_{_ids()}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [{"type": "output_text", "text": text, "annotations": []}]
        if text or status == "completed"
        else [],
    }


def _reasoning_item(text: str, id_: str | None = None) -> dict[str, Any]:
    return {
        "id": id_ or f"rs_{_ids()}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }


def _response_id(id_: str) -> str:
    return id_ if id_.startswith("resp_") else f"resp_{id_ or _ids()}"


def completion_from_canonical(
    body: dict[str, Any], names: ToolNames | None = None
) -> dict[str, Any]:
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        output.append(_reasoning_item(message["reasoning_content"]))
    text = message_text(message.get("content"))
    if text:
        output.append(_message_item(text))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        output.append(
            call_item(
                str(call.get("id")),
                str(function.get("name")),
                function.get("arguments") or "",
                names or {},
                id_=f"fc_{_ids()}",
            )
        )
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    return _response(
        _response_id(str(body.get("id") or "")),
        str(body.get("model") or ""),
        status,
        output,
        body.get("usage") or {},
    )


# ------------------------------------------------------------------------------ streams
class StreamDecoder:
    """An ``openai-responses`` upstream's events → canonical chunks (``response.completed``
    or ``response.incomplete`` end it; a body that ends before either was cut)."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.finished = False
        self.usage: dict[str, Any] | None = None
        self.next_sequence = 0  # after the latest event's ``sequence_number``
        self._calls: dict[str, int] = {}  # item id -> tool call index
        # What the client has, for a rescue to continue it (kept only when ``keep``: the
        # finished items, the open one, its output index, text part and text so far).
        self.keep = False
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.open_index = -1
        self.open_part: int | None = None
        self.open_text: list[str] = []

    def _track(self, kind: object, event: dict[str, Any]) -> None:
        if kind == "response.output_item.added":
            item = event.get("item")
            self.open = item if isinstance(item, dict) else None
            index = event.get("output_index")
            self.open_index = index if isinstance(index, int) else -1
            self.open_part, self.open_text = None, []
        elif kind == "response.content_part.added":
            index = event.get("content_index")
            self.open_part = index if isinstance(index, int) else None
        elif kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str):
                self.open_text.append(delta)
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, dict):
                self.output.append(item)
            self.open, self.open_index, self.open_part, self.open_text = None, -1, None, []

    def decode(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        sequence = event.get("sequence_number")
        if isinstance(sequence, int):
            self.next_sequence = sequence + 1
        if self.keep:
            self._track(kind, event)
        if kind == "response.output_text.delta":
            return [chunk(self.id, self.model, {"content": event.get("delta", "")})]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [chunk(self.id, self.model, {"reasoning_content": event.get("delta", "")})]
        if kind == "response.function_call_arguments.delta":
            index = self._calls.get(str(event.get("item_id")), 0)
            call = {"index": index, "function": {"arguments": event.get("delta", "")}}
            return [chunk(self.id, self.model, {"tool_calls": [call]})]
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            itype = item.get("type")
            if itype in ("function_call", "custom_tool_call"):
                index = len(self._calls)
                self._calls[str(item.get("id"))] = index
                # A custom call's text arrives whole with its ``.done`` (below).
                arguments = "" if itype == "custom_tool_call" else None
                call = {"index": index, **_call_in(item, arguments)}
                return [chunk(self.id, self.model, {"tool_calls": [call]})]
            if isinstance(itype, str) and itype not in ("message", "reasoning"):
                return [chunk(self.id, self.model, {OPAQUE: [itype]})]
            return []
        if kind == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") == "custom_tool_call":
                index = self._calls.get(str(item.get("id")), 0)
                arguments = custom_arguments(item.get("input"))
                call = {"index": index, "function": {"arguments": arguments}}
                return [chunk(self.id, self.model, {"tool_calls": [call]})]
            return []
        if kind == "response.created":
            response = event.get("response") or {}
            self.id = str(response.get("id") or "")
            self.model = str(response.get("model") or "")
            return [chunk(self.id, self.model, {"role": "assistant", "content": ""})]
        if kind in ("response.completed", "response.incomplete"):
            response = event.get("response") or {}
            self.finished = True
            self.usage = _usage_in(response.get("usage"))
            finish = _finish_from(response, bool(self._calls))
            out = [chunk(self.id, self.model, {}, finish)]
            if self.usage:
                out.append(usage_chunk(self.id, self.model, self.usage))
            return out
        return []


def frame(payload: bytes, event: dict[str, Any]) -> bytes:
    kind = event.get("type")
    name = kind.encode() if isinstance(kind, str) else b"message"
    return b"event: " + name + b"\ndata: " + payload + b"\n\n"


def error_from_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """The error object of a ``response.failed`` / ``error`` event, else None."""
    kind = event.get("type")
    if kind == "response.failed":
        error = (event.get("response") or {}).get("error") or {}
        return {"message": error.get("message") or "response failed", "code": error.get("code")}
    if kind == "error":
        return {"message": event.get("message") or "upstream error", "code": event.get("code")}
    return None


class StreamEncoder:
    """Canonical chunks → the ``/v1/responses`` door's events, numbered.

    ``response.created`` + ``response.in_progress`` (the preamble) go out with the first
    committed chunk; each output item opens with ``output_item.added`` and closes with its
    ``.done`` events; ``response.completed`` carries the whole output and usage at ``end``.
    """

    def __init__(self, names: ToolNames | None = None) -> None:
        self._names = names or {}  # canonical tool name -> as the client declared it
        self._seq = 0
        self._id = ""
        self._model = ""
        self._output: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None

    def _event(self, kind: str, data: dict[str, Any]) -> bytes:
        data = {"type": kind, **data, "sequence_number": self._seq}
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"

    def encode(self, chunks: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> bytes:
        out: list[bytes] = []
        for item in chunks:
            if not self._id:
                self._id = _response_id(str(item.get("id") or ""))
                self._model = str(item.get("model") or "")
                shell = _response(self._id, self._model, "in_progress", [], None)
                out.append(self._event("response.created", {"response": shell}))
                out.append(self._event("response.in_progress", {"response": shell}))
            if item.get("usage"):
                self._usage = item["usage"]
            for choice in item.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content"):
                    self._reasoning(delta["reasoning_content"], out)
                if delta.get("content"):
                    self._content(delta["content"], out)
                for call in delta.get("tool_calls") or ():
                    self._tool(call, out)
                if choice.get("finish_reason"):
                    self._finish = choice["finish_reason"]
        return b"".join(out)

    def _begin(self, item: dict[str, Any], out: list[bytes]) -> None:
        self._close(out)
        self._open = item
        self._text = []
        out.append(
            self._event(
                "response.output_item.added", {"output_index": len(self._output), "item": item}
            )
        )

    def _reasoning(self, text: str, out: list[bytes]) -> None:
        if self._open is None or self._open["type"] != "reasoning":
            self._begin(_reasoning_item(""), out)
            out.append(
                self._event(
                    "response.reasoning_summary_part.added",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "summary_index": 0,
                        "part": {"type": "summary_text", "text": ""},
                    },
                )
            )
        self._text.append(text)
        out.append(
            self._event(
                "response.reasoning_summary_text.delta",
                {
                    "item_id": self._open_id,
                    "output_index": len(self._output),
                    "summary_index": 0,
                    "delta": text,
                },
            )
        )

    @property
    def _open_id(self) -> str:
        return str(self._open["id"]) if self._open is not None else ""

    def _content(self, text: str, out: list[bytes]) -> None:
        if self._open is None or self._open["type"] != "message":
            self._begin(_message_item("", status="in_progress"), out)
            out.append(
                self._event(
                    "response.content_part.added",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []},
                    },
                )
            )
        self._text.append(text)
        out.append(
            self._event(
                "response.output_text.delta",
                {
                    "item_id": self._open_id,
                    "output_index": len(self._output),
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                },
            )
        )

    def _tool(self, call: dict[str, Any], out: list[bytes]) -> None:
        function = call.get("function") or {}
        index = int(call.get("index") or 0)
        if call.get("id") or index not in self._tools:
            item = call_item(
                str(call.get("id") or f"call_{_ids()}"),
                str(function.get("name") or ""),
                "",
                self._names,
                id_=f"fc_{_ids()}",
                status="in_progress",
            )
            self._begin(item, out)
            self._tools[index] = item
        arguments = function.get("arguments")
        if arguments:
            self._text.append(arguments)
            if self._open is not None and self._open["type"] == "custom_tool_call":
                return  # its text is known whole only at the end (``_close``)
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    {
                        "item_id": self._open_id,
                        "output_index": len(self._output),
                        "delta": arguments,
                    },
                )
            )

    def _close(self, out: list[bytes]) -> None:
        item = self._open
        if item is None:
            return
        text = "".join(self._text)
        index = len(self._output)
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            out.append(
                self._event(
                    "response.output_text.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    },
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "part": part,
                    },
                )
            )
            item = {**item, "status": "completed", "content": [part]}
        elif item["type"] == "reasoning":
            part = {"type": "summary_text", "text": text}
            out.append(
                self._event(
                    "response.reasoning_summary_text.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": 0,
                        "text": text,
                    },
                )
            )
            out.append(
                self._event(
                    "response.reasoning_summary_part.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "summary_index": 0,
                        "part": part,
                    },
                )
            )
            item = {**item, "summary": [part]}
        elif item["type"] == "custom_tool_call":
            text = custom_input(text)
            out.append(
                self._event(
                    "response.custom_tool_call_input.done",
                    {"item_id": item["id"], "output_index": index, "input": text},
                )
            )
            item = {**item, "input": text, "status": "completed"}
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    {"item_id": item["id"], "output_index": index, "arguments": text},
                )
            )
            item = {**item, "arguments": text, "status": "completed"}
        out.append(self._event("response.output_item.done", {"output_index": index, "item": item}))
        self._output.append(item)
        self._open = None
        self._text = []

    def end(self) -> bytes:
        out: list[bytes] = []
        self._close(out)
        status = "incomplete" if self._finish == "length" else "completed"
        response = _response(self._id, self._model, status, self._output, self._usage or {})
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        out.append(self._event(kind, {"response": response}))
        return b"".join(out)

    def error(self, message: str, code: str) -> bytes:
        """``response.failed``: a stream that failed after its commit point."""
        return failed_event(
            self._id or _response_id(""), self._model, self._seq, message, code, self._output
        )


def continuing(decoder: StreamDecoder, names: ToolNames | None = None) -> StreamEncoder | None:
    """An encoder that goes on with the pass-through stream ``decoder`` read (kept with
    ``keep``), from where the client is: the same response, its numbering, its finished
    items, and the open message's text part. None where text cannot go on: before the
    response began, or inside a reasoning item, a tool call or another part."""
    item = decoder.open
    if not decoder.id:
        return None
    if item is not None and (
        item.get("type") != "message"
        or not isinstance(item.get("id"), str)
        or decoder.open_part != 0
        or decoder.open_index != len(decoder.output)
    ):
        return None
    encoder = StreamEncoder(names)
    encoder._id, encoder._model = decoder.id, decoder.model
    encoder._seq = decoder.next_sequence
    encoder._output = list(decoder.output)
    encoder._open, encoder._text = item, list(decoder.open_text)
    return encoder


def failed_event(
    id_: str,
    model: str,
    sequence_number: int,
    message: str,
    code: str,
    output: list[dict[str, Any]] | None = None,
) -> bytes:
    """``response.failed`` for the response ``id_`` (clients check it is the same one)."""
    response = _response(id_, model, "failed", output or [], None)
    response["error"] = {"code": code, "message": message}
    data = {"type": "response.failed", "response": response, "sequence_number": sequence_number}
    return b"event: response.failed\ndata: " + orjson.dumps(data) + b"\n\n"
