"""Anthropic Messages requests <-> the canonical (Chat Completions) request.

``to_canonical`` reads the ``/v1/messages`` door's body; ``from_canonical`` writes the body
an ``anthropic`` target gets. The mapping decisions are the package's (``messages``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from routing.protocols import EFFORT_BUDGETS, Unmappable, effort_for_budget, function_tool
from routing.protocols.canonical import (
    call_arguments,
    function_choice,
    image_source,
    image_url,
    message_text,
)
from routing.protocols.fields import (
    CHAT_DROPPED,
    CHAT_HINTS_DROPPED,
    CHAT_MAPPED,
    CHAT_ONLY,
    DROPPED,
    MAPPED,
    Table,
    check,
    mapped_parts,
    refused,
)
from routing.protocols.messages.reply import tool_use_call

DEFAULT_MAX_TOKENS = 8192

# Request fields that are the same on both sides.
_SAME = ("temperature", "top_p", "stream")

# The Messages door's fields on a translated leg (``routing.protocols.fields``).
DOOR_FIELDS: Table = {
    **dict.fromkeys(
        (
            "model",
            "messages",
            "system",
            "max_tokens",
            "stream",
            "temperature",
            "top_p",
            "stop_sequences",
            "tools",
            "tool_choice",
            "thinking",
            "metadata",  # user_id → user
        ),
        MAPPED,
    ),
    "output_config": mapped_parts(
        {
            "effort": MAPPED,
            # → chat ``response_format: json_schema`` / Responses ``text.format`` (SPEC §12;
            # Claude Code's session titles). Not ``strict``: the schema subsets differ.
            "format": MAPPED,
        }
    ),
    "mcp_servers": refused(
        "MCP servers the provider connects to and calls itself", harmless=lambda v: not v
    ),
    # Sampling taste, caching, placement and speed hints; server-side context editing
    # (without it the target sees the whole context, and a too-long one is its own failure).
    **dict.fromkeys(
        (
            "top_k",
            "service_tier",
            "container",
            "cache_control",
            "context_management",
            "inference_geo",
            "speed",
            "diagnostics",
        ),
        DROPPED,
    ),
}
DOOR_TARGETS = "targets of another kind than anthropic"


# --------------------------------------------------------------------------- requests in
def to_canonical(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A Messages request as a canonical chat request (and the rewrite notes)."""
    notes = check(DOOR_FIELDS, body, target=DOOR_TARGETS)
    if "cache_control" not in body and _marks_cache(body):
        notes.append("dropped cache_control")  # on blocks: the other protocols cache alone
    out: dict[str, Any] = {"model": body.get("model")}
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = system if isinstance(system, str) else _blocks_text(system, "system")
        messages.append({"role": "system", "content": text})
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise Unmappable("'messages' must be an array.", param="messages")
    for i, message in enumerate(raw_messages):
        messages.extend(_message_in(message, f"messages[{i}]"))
    out["messages"] = messages
    for name in _SAME:
        if name in body:
            out[name] = body[name]
    if body.get("stream"):
        out["stream_options"] = {"include_usage": True}
    if "max_tokens" in body:
        out["max_tokens"] = body["max_tokens"]
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool_in(tool, f"tools[{i}]") for i, tool in enumerate(tools)]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "auto":
            out["tool_choice"] = "auto"
        elif kind == "any":
            out["tool_choice"] = "required"
        elif kind == "none":
            out["tool_choice"] = "none"
        elif kind == "tool":
            out["tool_choice"] = function_choice(choice.get("name"))
        if choice.get("disable_parallel_tool_use"):
            out["parallel_tool_calls"] = False
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        budget = int(thinking.get("budget_tokens") or EFFORT_BUDGETS["medium"])
        out["reasoning_effort"] = effort_for_budget(budget)
    config = body.get("output_config")
    level = config.get("effort") if isinstance(config, dict) else None
    if level in EFFORT_BUDGETS:  # Anthropic's effort level is the same scale, above "max"
        out["reasoning_effort"] = level
    elif level == "max":
        out["reasoning_effort"] = "xhigh"
        notes.append("effort:max->xhigh")
    fmt = config.get("format") if isinstance(config, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema") or {"type": "object"}
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": str(fmt.get("name") or "output"), "schema": schema},
        }
    elif fmt is not None:
        raise Unmappable(
            "'output_config.format' is not a json_schema format, which targets of another "
            "kind than anthropic cannot give; send it to an anthropic group, or leave it out.",
            param="output_config.format",
        )
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and metadata.get("user_id"):
        out["user"] = _user(str(metadata["user_id"]), notes)
    return out, notes


# OpenAI refuses a ``user`` longer than this (chat and Responses).
USER_MAX = 64


def _user(user_id: str, notes: list[str]) -> str:
    """``metadata.user_id`` as a chat/Responses ``user``: itself when it fits OpenAI's limit,
    else a stable digest of it (Claude Code's is a ~150-character JSON string), noted."""
    if len(user_id) <= USER_MAX:
        return user_id
    notes.append(f"hashed metadata.user_id (over {USER_MAX} characters) into user")
    return "sha256:" + hashlib.sha256(user_id.encode()).hexdigest()[:48]


def _marks_cache(body: dict[str, Any]) -> bool:
    """Whether a system, tool or message block carries a ``cache_control`` breakpoint."""
    blocks: list[Any] = []
    for part in (body.get("system"), body.get("tools")):
        if isinstance(part, list):
            blocks += part
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks += content
    return any(isinstance(block, dict) and "cache_control" in block for block in blocks)


def _blocks_text(blocks: Any, where: str) -> str:
    if not isinstance(blocks, list):
        raise Unmappable(f"'{where}' must be a string or an array of text blocks.", param=where)
    parts = []
    for j, block in enumerate(blocks):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise Unmappable(f"'{where}[{j}]' must be a text block.", param=where)
        parts.append(str(block.get("text", "")))
    return "\n\n".join(parts)


def _message_in(message: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        raise Unmappable(f"'{where}' must have role 'user', 'assistant' or 'system'.", param=where)
    role, content = message["role"], message.get("content")
    if role == "system":  # a mid-conversation system message (Claude Code): kept in place
        text = content if isinstance(content, str) else _blocks_text(content, f"{where}.content")
        return [{"role": "system", "content": text}]
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise Unmappable(f"'{where}.content' must be a string or an array.", param=where)
    if role == "assistant":
        return [_assistant_in(content, where)]
    tool_messages: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(
                {"type": "image_url", "image_url": {"url": image_url(block.get("source") or {})}}
            )
        elif kind == "tool_result":
            result = block.get("content")
            text = result if isinstance(result, str) else _result_text(result, f"{where}[{j}]")
            if block.get("is_error"):
                text = f"[tool error] {text}"
            tool_messages.append(
                {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}
            )
        else:
            raise Unmappable(
                f"'{where}.content[{j}]' is a '{kind}' block, which only Anthropic targets accept.",
                param=where,
            )
    out = tool_messages
    if parts:
        out.append({"role": "user", "content": parts[0]["text"] if _only_text(parts) else parts})
    return out


def _only_text(parts: list[dict[str, Any]]) -> bool:
    return len(parts) == 1 and parts[0]["type"] == "text"


def _result_text(result: Any, where: str) -> str:
    if result is None:
        return ""
    if not isinstance(result, list):
        raise Unmappable(f"'{where}.content' must be a string or text blocks.", param=where)
    texts = []
    for block in result:
        if isinstance(block, dict) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            raise Unmappable(
                f"'{where}.content' has a non-text block; only Anthropic targets accept it.",
                param=where,
            )
    return "\n".join(texts)


def _assistant_in(content: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "redacted_thinking":
            continue  # opaque to every other protocol
        elif kind == "tool_use":
            calls.append(tool_use_call(block))
        else:
            raise Unmappable(
                f"'{where}.content[{j}]' is a '{kind}' block, which only Anthropic targets accept.",
                param=where,
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_in(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or not tool.get("name"):
        raise Unmappable(f"'{where}' must be a tool with a name.", param="tools")
    if tool.get("type") not in (None, "custom"):
        raise Unmappable(
            f"'{where}' is the Anthropic server tool '{tool.get('type')}', which only "
            "Anthropic targets run.",
            param="tools",
        )
    function: dict[str, Any] = {
        "name": tool["name"],
        "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


# -------------------------------------------------------------------------- requests out
# A canonical (chat) request's fields on the way to an ``anthropic`` target.
TARGET_FIELDS: Table = {
    **CHAT_MAPPED,
    "stop": MAPPED,
    **CHAT_ONLY,
    "response_format": refused(
        "a response format other than a JSON schema",
        harmless=lambda v: _plain_text(v) or _json_schema(v),
    ),
    **CHAT_DROPPED,
    **CHAT_HINTS_DROPPED,
}


def from_canonical(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    """A canonical chat request as the Messages request an ``anthropic`` target gets."""
    notes = check(TARGET_FIELDS, body, target="anthropic targets")
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    dropped_reasoning = False
    for message in body.get("messages") or ():
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(message_text(message.get("content")))
            continue
        if role == "assistant" and message.get("reasoning_content"):
            dropped_reasoning = True
        blocks, out_role = _blocks_out(message)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == out_role:
            messages[-1]["content"].extend(blocks)  # Messages alternates roles
        else:
            messages.append({"role": out_role, "content": blocks})
    if dropped_reasoning:
        notes.append("dropped reasoning from history (Anthropic needs its own signed thinking)")
    out: dict[str, Any] = {"model": model, "messages": messages}
    if system:
        out["system"] = "\n\n".join(s for s in system if s)
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    if not max_tokens:
        max_tokens = DEFAULT_MAX_TOKENS
        notes.append(f"max_tokens set to {DEFAULT_MAX_TOKENS} (anthropic requires one)")
    out["max_tokens"] = int(max_tokens)
    for name in _SAME:
        if name in body:
            out[name] = body[name]
    if isinstance(out.get("temperature"), int | float) and out["temperature"] > 1:
        out["temperature"] = 1.0
        notes.append("temperature capped at 1 (anthropic's range)")
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool_out(tool, i) for i, tool in enumerate(tools)]
    choice = _tool_choice_out(body.get("tool_choice"))
    if body.get("parallel_tool_calls") is False and tools:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        out["tool_choice"] = choice
    effort = body.get("reasoning_effort")
    if effort in EFFORT_BUDGETS:
        budget = EFFORT_BUDGETS[effort]
        out["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if out["max_tokens"] <= budget:
            out["max_tokens"] = budget + DEFAULT_MAX_TOKENS
            notes.append(f"max_tokens raised to {out['max_tokens']} above the thinking budget")
        out.pop("temperature", None)  # thinking requires the default temperature
        out.pop("top_p", None)
    if body.get("user"):
        out["metadata"] = {"user_id": str(body["user"])}
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and _json_schema(fmt):
        schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        out["output_config"] = {
            **(out.get("output_config") or {}),
            "format": {"type": "json_schema", "schema": schema},
        }
    return out, notes


def _json_schema(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "json_schema"


def _plain_text(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "text"


def _blocks_out(message: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    role = message.get("role")
    if role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": message_text(message.get("content")),
            }
        ], "user"
    content = message.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                blocks.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                blocks.append({"type": "image", "source": image_source(str(url))})
            else:
                raise Unmappable(
                    f"a '{kind}' content part has no counterpart on anthropic targets.",
                    param="messages",
                )
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": call_arguments(function.get("arguments")),
            }
        )
    return blocks, "assistant" if role == "assistant" else "user"


def _tool_out(tool: dict[str, Any], index: int) -> dict[str, Any]:
    function = function_tool(tool, index, "anthropic")
    out = {"name": function["name"], "input_schema": function["parameters"]}
    if "description" in function:
        out["description"] = function["description"]
    return out


def _tool_choice_out(choice: Any) -> dict[str, Any] | None:
    if choice in (None, "auto"):
        return {"type": "auto"} if choice == "auto" else None
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        return {"type": "tool", "name": name}
    return None


def test_body(model: str) -> dict[str, object]:
    """The cheapest request the provider's "test" button and the health check send."""
    return {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
