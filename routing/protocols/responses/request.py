"""OpenAI Responses requests <-> the canonical (Chat Completions) request.

``to_canonical`` reads the ``/v1/responses`` door's body (``input`` as a string or items,
``instructions``, function tools, ``reasoning``); ``from_canonical`` writes the body an
``openai-responses`` target gets, always ``store: false``. ``refuse_stored`` is the door's
own check, whatever the target.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from routing.protocols import Unmappable
from routing.protocols.canonical import function_choice, message_text
from routing.protocols.fields import (
    CHAT_DROPPED,
    CHAT_MAPPED,
    CHAT_ONLY,
    DROPPED,
    MAPPED,
    Table,
    check,
    is_false,
    mapped_parts,
    refused,
)
from routing.protocols.responses.tools import (
    HOSTED_ITEMS,
    HostedTools,
    canonical_call,
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
# are read with ``tools`` (``tools``); a ``configuration_update`` (Codex: the
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
        out["tool_choice"] = function_choice(name)
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
        # In history, a function call without arguments took none: "{}".
        arguments = None if kind == "custom_tool_call" else item.get("arguments") or "{}"
        call = canonical_call(item, arguments)
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
    **CHAT_MAPPED,
    **dict.fromkeys(("response_format", "verbosity", *_COPIED), MAPPED),
    **CHAT_ONLY,
    **CHAT_DROPPED,
    "stop": DROPPED,  # Responses has no stop sequences
}


def from_canonical(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    notes = check(TARGET_FIELDS, body, target="openai-responses targets")
    instructions, items, dropped_reasoning = _input_out(body.get("messages") or ())
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


def _input_out(
    messages: Iterable[dict[str, Any]],
) -> tuple[list[str], list[dict[str, Any]], bool]:
    """A canonical history as ``instructions`` and ``input`` items, and whether it carried
    reasoning (which a Responses target cannot take: it needs its own reasoning items)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    dropped_reasoning = False
    for message in messages:
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
            items += _assistant_out(message)
        else:
            items.append({"type": "message", "role": "user", "content": _parts_out(content)})
    return instructions, items, dropped_reasoning


def _assistant_out(message: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's text and tool calls as ``input`` items."""
    items: list[dict[str, Any]] = []
    text = message_text(message.get("content"))
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
    return items


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


def test_body(model: str) -> dict[str, object]:
    """The cheapest request the provider's "test" button and the health check send."""
    return {"model": model, "input": "ping", "max_output_tokens": 16, "store": False}
