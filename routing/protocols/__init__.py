"""The three wire protocols the gateway speaks, as front doors and as upstream kinds.

``Protocol`` names a protocol by the provider ``kind`` that speaks it upstream (SPEC §12):
``openai`` (Chat Completions), ``anthropic`` (Messages), ``openai-responses`` (Responses).

The canonical view in between is the Chat Completions shape, with the fields the OpenAI-
compatible ecosystem already uses for what Chat Completions itself lacks
(``reasoning_content`` on messages and deltas, ``prompt_tokens_details.cached_tokens`` and
``cache_creation_input_tokens`` in usage). It was chosen because it is the existing relay's
shape (the chat door with an ``openai`` target stays a zero-translation pass-through) and
because every concept the other two protocols carry between a client and a model — text,
reasoning/thinking, tool definitions, tool choice, tool calls and results, images, stop
reasons, usage — has a place in it. Each protocol module translates its requests, answers
and streams to and from that view; nothing else in the gateway knows a protocol's fields.

Modules: ``registry`` (the one place a protocol and a platform are declared: each kind's
codecs, history view, error shapes and names, and how each platform reaches it; what
names kinds elsewhere derives from it); ``messages`` (Anthropic) and ``responses`` (OpenAI
Responses), each a package of ``request`` (the request to and from the canonical one),
``reply`` (JSON answers and errors) and ``stream`` (SSE codecs); ``chat`` (Chat
Completions: its requests and answers are the canonical view, so only its error shapes
and test request); ``canonical`` (the canonical shapes' builders, and what the packages
share: the answer builders, the stream codecs' bases, the SSE framing); ``fields`` (what a
translation does with each top-level field: map, drop with a note, refuse); ``legs`` (a
front door paired with an upstream kind, looked up in the registry: pass-through or
translation, and the kinds a request skips); ``naming`` (an answer names the model the
client asked for, renamed in the upstream's own bytes).

Exception tree::

    Unmappable(ValueError)     a request field with no counterpart on the target's kind
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Protocol(StrEnum):
    """A protocol's name: the provider ``kind`` that speaks it. Everything else about it
    is its ``routing.protocols.registry.PROTOCOLS`` entry."""

    CHAT = "openai"
    MESSAGES = "anthropic"
    RESPONSES = "openai-responses"
    GEMINI = "gemini"
    CONVERSE = "bedrock-converse"


class Unmappable(ValueError):
    """A request cannot be expressed for a target's kind (answered with a 400, before any
    upstream is called). ``param`` names the offending field."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


FINISH_TO_ANTHROPIC = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
ANTHROPIC_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

# Anthropic's thinking budget <-> the reasoning effort Chat Completions and Responses use.
EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}


def effort_for_budget(budget: int) -> str:
    for effort, ceiling in (("low", 4096), ("medium", 12288)):
        if budget <= ceiling:
            return effort
    return "high"


def function_tool(tool: dict[str, Any], index: int, kind: str) -> dict[str, Any]:
    """The name, description and parameters of chat tool ``index`` as a target ``kind``
    declares a function: ``{"name", "parameters"[, "description"]}`` (an empty object
    schema when it has none); Unmappable when it is not a function tool."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict):
        raise Unmappable(
            f"tools[{index}] is not a function tool; {kind} targets take function tools only.",
            param="tools",
        )
    out: dict[str, Any] = {
        "name": function.get("name"),
        "parameters": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out
