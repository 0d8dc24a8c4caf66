"""Gemini ``generateContent`` requests <-> the canonical (Chat Completions) request.

``to_canonical`` reads a Gemini body (the door's; the model comes from the path, so the
door puts it in ``model``); ``from_canonical`` writes the body a ``gemini`` target gets
(without ``model``: Google names it in the URL). The mapping decisions are the package's
(``routing.protocols.gemini``).
"""

from __future__ import annotations

from typing import Any

import orjson

from routing.protocols import EFFORT_BUDGETS, Unmappable, effort_for_budget, function_tool
from routing.protocols.canonical import function_choice, message_text
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
from routing.protocols.gemini.reply import (
    SIGNATURE,
    function_call_of,
    function_call_part,
    signature_of,
)
from routing.protocols.gemini.schema import to_json_schema
from routing.protocols.responses.tools import HostedTools

# Google's documented placeholder for a function call whose signature was lost to
# migrated history (Gemini 3 refuses the current turn's calls without one).
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"
HOSTED = ("googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "googleMaps")
JSON = "application/json"
_SIGNATURE_ONLY = frozenset({SIGNATURE, "thought"})

_GENERATION: Table = {
    **dict.fromkeys(
        (
            "temperature",
            "topP",
            "maxOutputTokens",
            "stopSequences",
            "responseMimeType",
            "responseSchema",
            "responseJsonSchema",
            "thinkingConfig",
            "seed",
            "presencePenalty",
            "frequencyPenalty",
        ),
        MAPPED,
    ),
    "candidateCount": refused("several candidates", harmless=lambda v: v == 1),
    "responseLogprobs": refused("log probabilities", harmless=lambda v: v is False),
    "logprobs": refused("log probabilities", harmless=lambda v: v == 0),
    "responseModalities": refused("non-text output", harmless=lambda v: v == ["TEXT"]),
    "speechConfig": refused("speech output"),
    "imageConfig": refused("image output"),
    **dict.fromkeys(("topK", "mediaResolution", "enableEnhancedCivicAnswers"), DROPPED),
}
# The Gemini door's fields on a translated leg (``routing.protocols.fields``).
DOOR_FIELDS: Table = {
    **dict.fromkeys(
        ("model", "stream", "contents", "systemInstruction", "tools", "toolConfig"), MAPPED
    ),
    "generationConfig": mapped_parts(_GENERATION),
    # A cache names state on Google's side: another kind cannot see it.
    "cachedContent": refused("a context cache stored on Google's side"),
    **dict.fromkeys(("safetySettings", "labels"), DROPPED),
}
DOOR_TARGETS = "targets of another kind than gemini"


# --------------------------------------------------------------------------- requests in
def to_canonical(
    body: dict[str, Any], hosted_tools: HostedTools = HostedTools.DROP
) -> tuple[dict[str, Any], list[str]]:
    """A Gemini request as a canonical chat request (and the rewrite notes)."""
    notes = check(DOOR_FIELDS, body, target=DOOR_TARGETS)
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system:
        text = _parts_text(system, "systemInstruction")
        if text:
            messages.append({"role": "system", "content": text})
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise Unmappable("'contents' must be an array.", param="contents")
    calls: dict[str, list[str]] = {}  # ids of calls not answered yet, by function name
    for i, content in enumerate(contents):
        messages.extend(_content_in(content, f"contents[{i}]", calls))
    out: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if body.get("stream"):
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    tools, tool_notes = _tools_in(body.get("tools"), hosted_tools)
    notes += tool_notes
    if tools:
        out["tools"] = tools
    choice = _tool_choice_in(body.get("toolConfig"))
    if choice is not None:
        out["tool_choice"] = choice
    config = body.get("generationConfig")
    if isinstance(config, dict):
        _generation_in(config, out)
    return out, notes


def _parts_text(content: Any, where: str) -> str:
    parts = content.get("parts") if isinstance(content, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(parts, list):
        raise Unmappable(f"'{where}' must have 'parts'.", param=where)
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and "text" in p)


def _content_in(content: Any, where: str, calls: dict[str, list[str]]) -> list[dict[str, Any]]:
    role = content.get("role", "user") if isinstance(content, dict) else None
    parts = content.get("parts") if isinstance(content, dict) else None
    if role not in ("user", "model") or not isinstance(parts, list):
        raise Unmappable(f"'{where}' must be a 'user' or 'model' turn with 'parts'.", param=where)
    if role == "model":
        return [_model_in(parts, where, calls)]
    results: list[dict[str, Any]] = []
    user: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise Unmappable(f"'{where}.parts[{j}]' must be an object.", param=where)
        if "text" in part:
            user.append({"type": "text", "text": str(part["text"])})
        elif "inlineData" in part or "fileData" in part:
            user.append({"type": "image_url", "image_url": {"url": _media_url(part, where)}})
        elif "functionResponse" in part:
            results.append(_result_in(part["functionResponse"], calls))
        else:
            raise Unmappable(
                f"'{where}.parts[{j}]' is a part only gemini targets accept.", param=where
            )
    if user:
        only_text = len(user) == 1 and user[0]["type"] == "text"
        results.append({"role": "user", "content": user[0]["text"] if only_text else user})
    return results


def _media_url(part: dict[str, Any], where: str) -> str:
    if "inlineData" in part:
        data = part["inlineData"] or {}
        mime, payload = data.get("mimeType", ""), data.get("data", "")
        url = f"data:{mime};base64,{payload}"
    else:
        data = part["fileData"] or {}
        mime, url = data.get("mimeType", ""), str(data.get("fileUri", ""))
    if not str(mime).startswith("image/"):
        raise Unmappable(
            f"'{where}' carries '{mime}' data; other kinds take images only.", param=where
        )
    return url


def _model_in(parts: list[Any], where: str, calls: dict[str, list[str]]) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise Unmappable(f"'{where}.parts[{j}]' must be an object.", param=where)
        if "functionCall" in part:
            call = function_call_of(part)
            tool_calls.append(call)
            calls.setdefault(str(call["function"]["name"]), []).append(call["id"])
        elif "text" in part:
            (reasoning if part.get("thought") else texts).append(str(part["text"]))
        elif set(part) <= _SIGNATURE_ONLY:
            continue  # a signature with nothing else (Gemini 3 streams them): its own
        else:
            raise Unmappable(
                f"'{where}.parts[{j}]' is a part only gemini targets accept.", param=where
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _result_in(result: Any, calls: dict[str, list[str]]) -> dict[str, Any]:
    """A ``functionResponse`` as a tool message; without an ``id`` it answers the oldest
    unanswered call of its name (the id that call was given)."""
    result = result if isinstance(result, dict) else {}
    name = str(result.get("name") or "")
    pending = calls.get(name) or []
    id_ = result.get("id")
    if id_ in pending:
        pending.remove(id_)
    elif not id_ and pending:
        id_ = pending.pop(0)
    response = result.get("response")
    if isinstance(response, dict) and len(response) == 1:
        only = next(iter(response.values()))
        if next(iter(response)) in ("output", "result", "content") and isinstance(only, str):
            return {"role": "tool", "tool_call_id": id_, "content": only}
    return {"role": "tool", "tool_call_id": id_, "content": orjson.dumps(response).decode()}


def _tools_in(tools: Any, hosted_tools: HostedTools) -> tuple[list[dict[str, Any]], list[str]]:
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict):
            raise Unmappable(f"'tools[{i}]' must be an object.", param="tools")
        for key in tool:
            if key == "functionDeclarations":
                out += [_declaration_in(d, f"tools[{i}]") for d in tool[key] or ()]
            elif hosted_tools is HostedTools.DROP and key in HOSTED:
                notes.append(f"dropped hosted tool {key}")
            else:
                raise Unmappable(
                    f"'tools[{i}].{key}' is a tool Google runs itself, which {DOOR_TARGETS} "
                    "cannot run.",
                    param="tools",
                )
    return out, notes


def _declaration_in(declaration: Any, where: str) -> dict[str, Any]:
    if not isinstance(declaration, dict) or not declaration.get("name"):
        raise Unmappable(f"'{where}' must declare functions with a name.", param="tools")
    if "parametersJsonSchema" in declaration:
        schema = declaration["parametersJsonSchema"]
    else:
        schema = to_json_schema(declaration.get("parameters"))
    function: dict[str, Any] = {
        "name": declaration["name"],
        "parameters": schema or {"type": "object", "properties": {}},
    }
    if declaration.get("description"):
        function["description"] = declaration["description"]
    return {"type": "function", "function": function}


def _tool_choice_in(config: Any) -> Any:
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict):
        return None
    mode = str(calling.get("mode") or "AUTO").upper()
    allowed = calling.get("allowedFunctionNames") or []
    if mode in ("ANY", "VALIDATED") and len(allowed) == 1:
        return function_choice(allowed[0])
    return {"ANY": "required", "NONE": "none"}.get(mode, "auto")


def _generation_in(config: dict[str, Any], out: dict[str, Any]) -> None:
    for gemini, chat in (
        ("temperature", "temperature"),
        ("topP", "top_p"),
        ("maxOutputTokens", "max_tokens"),
        ("seed", "seed"),
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
    ):
        if config.get(gemini) is not None:
            out[chat] = config[gemini]
    if config.get("stopSequences"):
        out["stop"] = list(config["stopSequences"])
    # JSON Schema in name, yet Gemini CLI 0.61.0 writes its classifier's responseJsonSchema
    # with the subset's upper-case types (Google takes them; other kinds reject "OBJECT"),
    # so both are normalised — a copy, and a no-op on lower-case JSON Schema.
    schema = config.get("responseJsonSchema", config.get("responseSchema"))
    if schema is not None:
        schema = to_json_schema(schema)
    if schema is not None:
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema},
        }
    elif config.get("responseMimeType") == JSON:
        out["response_format"] = {"type": "json_object"}
    effort = effort_of(config.get("thinkingConfig"))
    if effort is not None:
        out["reasoning_effort"] = effort


def effort_of(thinking: Any) -> str | None:
    """The effort a ``thinkingConfig`` asks for: its level, or its budget's (0: none, so
    no effort; -1, dynamic: none either, the target decides)."""
    if not isinstance(thinking, dict):
        return None
    # Google's JSON takes proto field names too (the google-genai SDK sends thinking_level)
    level = str(thinking.get("thinkingLevel") or thinking.get("thinking_level") or "").lower()
    if level in EFFORT_BUDGETS:
        return level
    budget = thinking.get("thinkingBudget", thinking.get("thinking_budget"))
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        return effort_for_budget(budget)
    return None


# -------------------------------------------------------------------------- requests out
# A canonical (chat) request's fields on the way to a ``gemini`` target.
TARGET_FIELDS: Table = {
    **CHAT_MAPPED,
    **dict.fromkeys(("stop", "response_format", "seed"), MAPPED),
    **dict.fromkeys(("presence_penalty", "frequency_penalty"), MAPPED),
    **CHAT_ONLY,
    **{key: rule for key, rule in CHAT_DROPPED.items() if key not in ("seed",)},
    **dict.fromkeys(("parallel_tool_calls", "user"), DROPPED),
    **CHAT_HINTS_DROPPED,
}
# Thinking levels Gemini 3 takes, for an effort (2.x models take a budget instead).
_LEVELS = {"minimal": "low", "low": "low", "medium": "high", "high": "high", "xhigh": "high"}


def from_canonical(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    """A canonical chat request as the ``generateContent`` body a ``gemini`` target gets."""
    notes = check(TARGET_FIELDS, body, target="gemini targets")
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[Any, Any] = {}  # a tool call's function name, by call id
    dropped_reasoning = False
    for message in body.get("messages") or ():
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(message_text(message.get("content")))
            continue
        dropped_reasoning |= role == "assistant" and bool(message.get("reasoning_content"))
        parts = _parts_out(message, names, placeholder=_gemini_3(model))
        out_role = "model" if role == "assistant" else "user"
        if not parts:
            continue
        if contents and contents[-1]["role"] == out_role:
            contents[-1]["parts"].extend(parts)  # one turn per side, results together
        else:
            contents.append({"role": out_role, "parts": parts})
    if dropped_reasoning:
        notes.append("dropped reasoning from history (Gemini keeps its own thought signatures)")
    out: dict[str, Any] = {"contents": contents}
    if any(system):
        out["systemInstruction"] = {"parts": [{"text": "\n\n".join(s for s in system if s)}]}
    tools = body.get("tools")
    if tools:
        out["tools"] = [
            {"functionDeclarations": [_declaration_out(t, i) for i, t in enumerate(tools)]}
        ]
    calling = _tool_config_out(body.get("tool_choice"))
    if calling is not None:
        out["toolConfig"] = {"functionCallingConfig": calling}
    config = _generation_out(body, model)
    if config:
        out["generationConfig"] = config
    return out, notes


def _parts_out(
    message: dict[str, Any], names: dict[Any, Any], *, placeholder: bool
) -> list[dict[str, Any]]:
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        response = {
            "id": call_id,
            "name": names.get(call_id, ""),
            "response": {"result": message_text(message.get("content"))},
        }
        return [{"functionResponse": response}]
    content = message.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            parts.append({"text": content})
    elif isinstance(content, list):
        parts += [_content_part_out(part) for part in content]
    for i, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        names[call.get("id")] = function.get("name")
        part = function_call_part(call.get("id"), function.get("name"), function.get("arguments"))
        signature = signature_of(call) or (
            PLACEHOLDER_SIGNATURE if placeholder and i == 0 else None
        )
        if signature:
            part[SIGNATURE] = signature
        parts.append(part)
    return parts


def _content_part_out(part: Any) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return {"text": str(part.get("text", ""))}
    if kind == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            mime, _, data = url[5:].partition(";base64,")
            return {"inlineData": {"mimeType": mime, "data": data}}
        return {"fileData": {"mimeType": _image_mime(url), "fileUri": url}}
    raise Unmappable(
        f"a '{kind}' content part has no counterpart on gemini targets.", param="messages"
    )


def _image_mime(url: str) -> str:
    suffix = url.rsplit(".", 1)[-1].lower() if "." in url else ""
    return {"png": "image/png", "gif": "image/gif", "webp": "image/webp"}.get(suffix, "image/jpeg")


def _declaration_out(tool: dict[str, Any], index: int) -> dict[str, Any]:
    function = function_tool(tool, index, "gemini")
    out = {"name": function["name"], "parametersJsonSchema": function["parameters"]}
    if "description" in function:
        out["description"] = function["description"]
    return out


def _tool_config_out(choice: Any) -> dict[str, Any] | None:
    if choice in ("auto", "required", "none"):
        return {"mode": {"auto": "AUTO", "required": "ANY", "none": "NONE"}[choice]}
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        return {"mode": "ANY", "allowedFunctionNames": [name]}
    return None


def _generation_out(body: dict[str, Any], model: str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for chat, gemini in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("seed", "seed"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ):
        if body.get(chat) is not None:
            config[gemini] = body[chat]
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens:
        config["maxOutputTokens"] = int(max_tokens)
    stop = body.get("stop")
    if stop:
        config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        config["responseMimeType"] = JSON
        schema = (fmt.get("json_schema") or {}).get("schema")
        config["responseJsonSchema"] = schema or {"type": "object"}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        config["responseMimeType"] = JSON
    effort = body.get("reasoning_effort")
    if effort in EFFORT_BUDGETS:
        thinking: dict[str, Any] = {"includeThoughts": True}
        if _gemini_3(model):
            thinking["thinkingLevel"] = _LEVELS[effort]
        else:
            thinking["thinkingBudget"] = EFFORT_BUDGETS[effort]
        config["thinkingConfig"] = thinking
    return config


def _gemini_3(model: str) -> bool:
    """Gemini 3 models think in levels and demand a signature on the turn's first call."""
    return model.removeprefix("models/").startswith("gemini-3")


def test_body(model: str) -> dict[str, object]:
    """The cheapest request the provider's "test" button and the health check send."""
    return {
        "contents": [{"role": "user", "parts": [{"text": "ping"}]}],
        "generationConfig": {"maxOutputTokens": 1},
    }


def signed_for(body: dict[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    """A Gemini-door body as a ``gemini`` target ``model`` gets it, and a note when it
    changed: for Gemini 3, which refuses a step's function calls without a thought
    signature, each model turn whose calls carry none (history from another target,
    stripped by continuity, or written by the client) gets Google's documented placeholder
    on its first call. A copy when changed; the very body otherwise."""
    contents = body.get("contents")
    if not _gemini_3(model) or not isinstance(contents, list):
        return body, []
    out: list[Any] | None = None
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        parts = content.get("parts")
        if not isinstance(parts, list):
            continue
        calls = [j for j, p in enumerate(parts) if isinstance(p, dict) and "functionCall" in p]
        if not calls or any(SIGNATURE in parts[j] for j in calls):
            continue
        if out is None:
            out = list(contents)
        signed = list(parts)
        signed[calls[0]] = {**parts[calls[0]], SIGNATURE: PLACEHOLDER_SIGNATURE}
        out[i] = {**content, "parts": signed}
    if out is None:
        return body, []
    placed = sum(a is not b for a, b in zip(out, contents, strict=True))
    return {**body, "contents": out}, [f"thought-signature-placeholder:{placed}"]
