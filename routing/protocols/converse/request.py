"""The canonical (Chat Completions) request -> a Converse request body.

The body has no ``model`` (Bedrock names it in the URL) and no ``stream`` (``/converse``
or ``/converse-stream`` says it). The mapping decisions are the package's
(``routing.protocols.converse``).
"""

from __future__ import annotations

from typing import Any

from routing.protocols import EFFORT_BUDGETS, Unmappable, function_tool
from routing.protocols.canonical import call_arguments, image_source, message_text
from routing.protocols.fields import (
    CHAT_DROPPED,
    CHAT_HINTS_DROPPED,
    CHAT_MAPPED,
    CHAT_ONLY,
    DROPPED,
    MAPPED,
    Table,
    check,
    refused,
)

TARGET = "bedrock-converse targets"
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

# A canonical (chat) request's fields on the way to a ``bedrock-converse`` target.
TARGET_FIELDS: Table = {
    **CHAT_MAPPED,
    "stop": MAPPED,
    **CHAT_ONLY,
    "response_format": refused(
        "a structured output format",
        harmless=lambda v: isinstance(v, dict) and v.get("type") == "text",
    ),
    **CHAT_DROPPED,
    **dict.fromkeys(("parallel_tool_calls", "user"), DROPPED),
    **CHAT_HINTS_DROPPED,
}


def from_canonical(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    """A canonical chat request as the Converse body a ``bedrock-converse`` target gets."""
    notes = check(TARGET_FIELDS, body, target=TARGET)
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    dropped_reasoning = False
    for message in body.get("messages") or ():
        role = message.get("role")
        if role in ("system", "developer"):
            text = message_text(message.get("content"))
            if text:
                system.append({"text": text})
            continue
        dropped_reasoning |= role == "assistant" and bool(message.get("reasoning_content"))
        blocks = _blocks_out(message)
        out_role = "assistant" if role == "assistant" else "user"
        if not blocks:
            continue
        if messages and messages[-1]["role"] == out_role:
            messages[-1]["content"].extend(blocks)  # Converse alternates roles
        else:
            messages.append({"role": out_role, "content": blocks})
    if dropped_reasoning:
        notes.append("dropped reasoning from history (Bedrock needs its own signed reasoning)")
    out: dict[str, Any] = {"messages": messages}
    if system:
        out["system"] = system
    inference = _inference_config(body)
    if inference:
        out["inferenceConfig"] = inference
    tools, tool_notes = _tool_config(body, messages)
    notes += tool_notes
    if tools:
        out["toolConfig"] = tools
    effort = body.get("reasoning_effort")
    if effort in EFFORT_BUDGETS:
        fields = _reasoning_fields(model, str(effort))
        if fields is None:
            notes.append("dropped reasoning_effort (no Converse setting for this model)")
        else:
            out["additionalModelRequestFields"] = fields
    return out, notes


def _reasoning_fields(model: str, effort: str) -> dict[str, Any] | None:
    """The model's own reasoning setting for an effort, passed through
    ``additionalModelRequestFields``: Claude's ``thinking`` budget, Amazon Nova's
    ``reasoningConfig``; None for a model whose setting is not known (many reason
    without one)."""
    if "anthropic." in model:
        return {"thinking": {"type": "enabled", "budget_tokens": EFFORT_BUDGETS[effort]}}
    if "amazon.nova" in model:
        level = {"minimal": "low", "xhigh": "high"}.get(effort, effort)
        return {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": level}}
    return None


def _blocks_out(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        result = {
            "toolUseId": message.get("tool_call_id"),
            "content": [{"text": message_text(message.get("content"))}],
        }
        return [{"toolResult": result}]
    content = message.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            blocks.append({"text": content})
    elif isinstance(content, list):
        blocks += [_part_out(part) for part in content]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = call_arguments(function.get("arguments"))
        tool_use = {
            "toolUseId": call.get("id"),
            "name": function.get("name"),
            "input": arguments if isinstance(arguments, dict) else {},
        }
        blocks.append({"toolUse": tool_use})
    return blocks


def _part_out(part: Any) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return {"text": str(part.get("text", ""))}
    if kind == "image_url":
        source = image_source(str((part.get("image_url") or {}).get("url", "")))
        image_format = IMAGE_FORMATS.get(str(source.get("media_type")))
        if source["type"] == "base64" and source["data"] and image_format:
            return {"image": {"format": image_format, "source": {"bytes": source["data"]}}}
        raise Unmappable(
            f"{TARGET} take images as base64 data URLs (png, jpeg, gif, webp) only.",
            param="messages",
        )
    raise Unmappable(f"a '{kind}' content part has no counterpart on {TARGET}.", param="messages")


def _inference_config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens:
        config["maxTokens"] = int(max_tokens)
    if body.get("temperature") is not None:
        config["temperature"] = body["temperature"]
    if body.get("top_p") is not None:
        config["topP"] = body["top_p"]
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    return config


def _tool_config(
    body: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, list[str]]:
    tools = body.get("tools") or []
    if not tools:
        return None, []
    specs = []
    for i, tool in enumerate(tools):
        function = function_tool(tool, i, "bedrock-converse")
        spec: dict[str, Any] = {
            "name": function["name"],
            "inputSchema": {"json": function["parameters"]},
        }
        if "description" in function:
            spec["description"] = function["description"]
        specs.append({"toolSpec": spec})
    choice = body.get("tool_choice")
    config: dict[str, Any] = {"tools": specs}
    if choice == "none":
        if not _uses_tools(messages):
            return None, ["dropped tools (tool_choice none)"]
        return config, ["dropped tool_choice none (Converse has no such choice)"]
    if choice == "required":
        config["toolChoice"] = {"any": {}}
    elif isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        config["toolChoice"] = {"tool": {"name": name}}
    elif choice == "auto":
        config["toolChoice"] = {"auto": {}}
    return config, []


def _uses_tools(messages: list[dict[str, Any]]) -> bool:
    """The history holds tool blocks (Converse then insists on a ``toolConfig``)."""
    return any(
        "toolUse" in block or "toolResult" in block
        for message in messages
        for block in message["content"]
    )


def test_body(model: str) -> dict[str, object]:
    """The cheapest request the provider's "test" button and the health check send."""
    return {
        "messages": [{"role": "user", "content": [{"text": "ping"}]}],
        "inferenceConfig": {"maxTokens": 1},
    }
