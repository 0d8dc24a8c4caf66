"""Responses tools ↔ canonical functions: namespaces, custom (freeform) tools, hosted tools.

What Codex sends (``tests/agents/recorded/codex_*.json``): with its default model its
tools arrive in an ``additional_tools`` input item rather than ``tools``, grouped in
``namespace`` tools (``functions``, ``clock``, ``collaboration``…), and its shell is a
``custom`` tool (``exec``: free text, not JSON). Chat Completions and Messages know only
functions, so on a translated leg:

- a namespaced function becomes the function ``<namespace>__<name>`` — except in the
  ``functions`` namespace, the default one, whose tools keep their names (Codex calls
  them without a namespace) — and a call to it goes back to the door as
  ``{"type": "function_call", "namespace": …, "name": …}`` (Codex refuses a flattened name);
- a custom tool becomes a function with one string argument, ``input``; a call to it goes
  back as ``custom_tool_call`` with that string as its ``input``, and the history's
  ``custom_tool_call`` / ``custom_tool_call_output`` items become a call and its result;
- a hosted tool (``web_search``, ``file_search``, ``code_interpreter``…) runs only at an
  ``openai-responses`` target: the group's ``hosted_tools`` says whether another kind gets
  the request without it (``drop``, noted) or is skipped (``skip``).

``ToolNames`` maps a canonical function name back to what the door's client declared;
names that need no mapping (plain functions) are not in it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from routing.protocols import Unmappable
from routing.protocols.canonical import tool_call

DEFAULT_NAMESPACE = "functions"
SEPARATOR = "__"
CUSTOM_ARGUMENT = "input"


# History items of hosted tools (their calls and results): under ``drop`` a translated leg
# leaves them out with the tools themselves; the model's own text about them stays.
HOSTED_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "computer_call_output",
        "mcp_call",
        "mcp_list_tools",
        "tool_search_call",
        "tool_search_output",
    }
)


class HostedTools(StrEnum):
    """A group's ``hosted_tools``: what a target that cannot run them gets."""

    DROP = "drop"
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class ToolName:
    """A tool as the door's client declared it."""

    name: str
    namespace: str | None = None
    custom: bool = False


ToolNames = Mapping[str, ToolName]


def flat_name(name: str, namespace: str | None) -> str:
    if not namespace or namespace == DEFAULT_NAMESPACE:
        return name
    return f"{namespace}{SEPARATOR}{name}"


def declared(body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every tool the request declares, with where: ``tools[i]``, then the tools of each
    ``additional_tools`` input item (``input[i].tools[j]``)."""
    tools = body.get("tools")
    if isinstance(tools, list):
        for i, tool in enumerate(tools):
            yield f"tools[{i}]", tool
    items = body.get("input")
    if isinstance(items, list):
        for i, item in enumerate(items):
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                for j, tool in enumerate(item.get("tools") or ()):
                    yield f"input[{i}].tools[{j}]", tool


def _leaves(
    tools: Iterator[tuple[str, Any]], namespace: str | None = None
) -> Iterator[tuple[str, Any, str | None]]:
    for where, tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            inner = tool.get("tools") or ()
            ns = str(tool.get("name") or "")
            yield from _leaves(((f"{where}.tools[{j}]", t) for j, t in enumerate(inner)), ns)
        else:
            yield where, tool, namespace


def tool_names(body: Mapping[str, Any]) -> dict[str, ToolName]:
    """Canonical name → declared tool, for the tools whose name or type a translated leg
    changes (empty for a request with plain functions only)."""
    names: dict[str, ToolName] = {}
    for _, tool, namespace in _leaves(declared(body)):
        if not isinstance(tool, dict) or tool.get("type") not in ("function", "custom"):
            continue
        name = str(tool.get("name") or "")
        custom = tool.get("type") == "custom"
        flat = flat_name(name, namespace)
        if custom or flat != name:
            names[flat] = ToolName(name, namespace, custom)
    return names


def tools_in(
    body: Mapping[str, Any], hosted: HostedTools
) -> tuple[list[dict[str, Any]], list[str]]:
    """The request's tools as canonical functions, and the notes for hosted tools dropped.

    Raises ``Unmappable`` for a hosted tool under ``skip``."""
    functions: list[dict[str, Any]] = []
    dropped: list[str] = []
    for where, tool, namespace in _leaves(declared(body)):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function":
            functions.append(_function(tool, flat_name(str(tool.get("name") or ""), namespace)))
        elif kind == "custom":
            functions.append(_custom(tool, flat_name(str(tool.get("name") or ""), namespace)))
        elif hosted is HostedTools.SKIP or not isinstance(kind, str):
            raise Unmappable(
                f"{where} is the hosted tool '{kind}', which only openai-responses targets run.",
                param="tools",
            )
        elif kind not in dropped:
            dropped.append(kind)
    return functions, [f"dropped hosted tool {kind}" for kind in dropped]


def _function(tool: Mapping[str, Any], name: str) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": name,
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    if "strict" in tool:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def _custom(tool: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A freeform tool as a function taking its text as one string argument. The
    grammar, when there is one, goes in the argument's description: the model still
    needs to know what text the tool takes."""
    about = "The tool's input: free text, not JSON."
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and fmt.get("definition"):
        about += f" It follows this {fmt.get('syntax') or ''} grammar:\n{fmt['definition']}"
    function: dict[str, Any] = {
        "name": name,
        "parameters": {
            "type": "object",
            "properties": {CUSTOM_ARGUMENT: {"type": "string", "description": about}},
            "required": [CUSTOM_ARGUMENT],
            "additionalProperties": False,
        },
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def custom_arguments(text: Any) -> str:
    """A custom tool call's ``input`` as the arguments of its function."""
    return orjson.dumps({CUSTOM_ARGUMENT: text if isinstance(text, str) else ""}).decode()


def custom_input(arguments: str) -> str:
    """Back: the function call's arguments as the custom tool's text (the arguments as
    they came when they are not the one-string object asked for)."""
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(parsed, dict) and isinstance(parsed.get(CUSTOM_ARGUMENT), str):
        return str(parsed[CUSTOM_ARGUMENT])
    return arguments


def call_item(
    call_id: str,
    flat: str,
    arguments: str,
    names: ToolNames,
    *,
    id_: str,
    status: str = "completed",
) -> dict[str, Any]:
    """The door's output item for a canonical tool call: ``function_call`` (with its
    ``namespace`` when it had one) or ``custom_tool_call``."""
    declared_as = names.get(flat)
    if declared_as is not None and declared_as.custom:
        item: dict[str, Any] = {
            "id": id_.replace("fc_", "ctc_", 1),
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": declared_as.name,
            "input": custom_input(arguments),
            "status": status,
        }
    else:
        item = {
            "id": id_,
            "type": "function_call",
            "call_id": call_id,
            "name": declared_as.name if declared_as else flat,
            "arguments": arguments,
            "status": status,
        }
    if declared_as is not None and declared_as.namespace and flat != declared_as.name:
        item["namespace"] = declared_as.namespace
    return item


def canonical_call(item: Mapping[str, Any], arguments: str | None = None) -> dict[str, Any]:
    """A ``function_call`` / ``custom_tool_call`` item (of an answer's output or of the
    history in ``input``) as a canonical tool call."""
    if arguments is None:
        arguments = (
            custom_arguments(item.get("input"))
            if item.get("type") == "custom_tool_call"
            else item.get("arguments") or ""
        )
    name = flat_name(str(item.get("name") or ""), item.get("namespace"))
    return tool_call(item.get("call_id"), name, arguments)
