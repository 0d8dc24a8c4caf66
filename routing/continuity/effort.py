"""Per-target reasoning-effort policy (SPEC §13), applied on every attempt.

``inherit`` passes the client's value, ``max`` sends the highest of the target's
``efforts`` (ordered ``minimal < low < medium < high < xhigh``), ``drop`` removes it. A
target with an ``efforts`` list never receives a value outside it: an unsupported one is
dropped (and said so in the rewrites) rather than sent to fail with a 400 — which is not
a switch code, so it would end the very failover meant to rescue the call.

The same policy applies to each door's own shape when its request passes through to a
target of the same protocol (a translated request carries the canonical
``reasoning_effort``, to which :func:`apply_effort` applies):

- **Responses** (:func:`apply_responses_effort`): ``reasoning.effort`` is the value, with
  exactly the Chat rules; ``drop`` removes the effort (and ``reasoning`` if nothing else
  is left in it: a ``summary`` setting stays).
- **Anthropic Messages** (:func:`apply_messages_effort`): two fields carry the effort.
  ``output_config.effort`` is a level and follows the Chat rules. ``thinking`` with
  ``type: enabled`` has a ``budget_tokens``, read as the level ``effort_for_budget`` gives
  it (≤4096 low, ≤12288 medium, else high: the mapping translation uses), and written for
  a level as ``EFFORT_BUDGETS`` says (minimal 1024, low 2048, medium 8192, high 16384,
  xhigh 32768). ``drop`` removes ``thinking`` (unless it is ``disabled``) and
  ``output_config.effort``. ``max`` sets ``output_config.effort`` to the top level when the
  client sent one (or asked for ``adaptive`` thinking, which stays adaptive), and a
  client's thinking budget to the top level's budget. A request with neither gets thinking
  turned on at that budget (what a translated request gets too): ``max_tokens`` is raised
  above the budget if needed and ``temperature``/``top_p``/``top_k`` are removed (Anthropic
  refuses them with thinking), each noted; not when ``tool_choice`` forces a tool
  (Anthropic refuses that combination with thinking), which is noted as unchanged. With
  ``inherit``, a budget whose level is outside ``efforts`` is dropped like any unsupported
  effort.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from routing.protocols import EFFORT_BUDGETS, effort_for_budget

EFFORT_ORDER: tuple[str, ...] = ("minimal", "low", "medium", "high", "xhigh")
EFFORT_FIELD = "reasoning_effort"


class EffortPolicy(StrEnum):
    INHERIT = "inherit"
    MAX = "max"
    DROP = "drop"


def highest(efforts: Sequence[str]) -> str | None:
    ranked = [e for e in EFFORT_ORDER if e in efforts]
    return ranked[-1] if ranked else None


def apply_effort(
    body: dict[str, Any], policy: EffortPolicy, efforts: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """The body with the policy applied (a copy when changed) and the rewrites made."""
    present = EFFORT_FIELD in body
    value = body.get(EFFORT_FIELD)
    if policy is EffortPolicy.DROP:
        if not present:
            return body, []
        return _without(body), [f"effort:{value}->dropped"]
    if policy is EffortPolicy.MAX and (top := highest(efforts)) is not None:
        if value == top:
            return body, []
        return {**body, EFFORT_FIELD: top}, [f"effort:{value if present else '-'}->{top}"]
    if present and efforts and value not in efforts:
        return _without(body), [f"effort:{value}->dropped(unsupported)"]
    return body, []


def _without(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != EFFORT_FIELD}


# --------------------------------------------------------------------------- Responses
def apply_responses_effort(
    body: dict[str, Any], policy: EffortPolicy, efforts: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """:func:`apply_effort` for a Responses body's ``reasoning.effort``."""
    reasoning = body.get("reasoning")
    settings = reasoning if isinstance(reasoning, dict) else {}
    value = settings.get("effort")
    present = value is not None
    if policy is EffortPolicy.DROP:
        if not present:
            return body, []
        return _with(body, "reasoning", _drop_key(settings, "effort")), [f"effort:{value}->dropped"]
    if policy is EffortPolicy.MAX and (top := highest(efforts)) is not None:
        if value == top:
            return body, []
        return {**body, "reasoning": {**settings, "effort": top}}, [
            f"effort:{value if present else '-'}->{top}"
        ]
    if present and efforts and value not in efforts:
        return _with(body, "reasoning", _drop_key(settings, "effort")), [
            f"effort:{value}->dropped(unsupported)"
        ]
    return body, []


# --------------------------------------------------------------------------- Messages
# The levels Anthropic's ``output_config.effort`` accepts.
ANTHROPIC_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_FORCED_TOOL = ("any", "tool")
_NOT_WITH_THINKING = ("temperature", "top_p", "top_k")


def apply_messages_effort(
    body: dict[str, Any], policy: EffortPolicy, efforts: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """:func:`apply_effort` for a Messages body's ``thinking`` and ``output_config.effort``."""
    out = body
    notes: list[str] = []
    config = body.get("output_config")
    settings = config if isinstance(config, dict) else {}
    level = settings.get("effort")
    thinking = body.get("thinking")
    mode = thinking.get("type") if isinstance(thinking, dict) else None
    raw = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    budget: int | None = raw if mode == "enabled" and type(raw) is int else None
    label = f"{effort_for_budget(budget)}(budget {budget})" if budget is not None else str(mode)

    def drop_thinking(note: str) -> None:
        nonlocal out
        out = {k: v for k, v in out.items() if k != "thinking"}
        notes.append(note)

    def drop_level(note: str) -> None:
        nonlocal out
        out = _with(out, "output_config", _drop_key(settings, "effort"))
        notes.append(note)

    if policy is EffortPolicy.DROP:
        if thinking is not None and mode != "disabled":
            drop_thinking(f"effort:{label}->dropped")
        if level is not None:
            drop_level(f"effort:{level}->dropped")
        return out, notes
    if policy is EffortPolicy.MAX and (top := highest(efforts)) is not None:
        return _messages_max(body, top, settings, mode, budget, label)
    if efforts and budget is not None and effort_for_budget(budget) not in efforts:
        drop_thinking(f"effort:{label}->dropped(unsupported)")
    if efforts and level is not None and level not in efforts:
        drop_level(f"effort:{level}->dropped(unsupported)")
    return out, notes


def _messages_max(
    body: dict[str, Any],
    top: str,
    settings: dict[str, Any],
    mode: object,
    budget: int | None,
    label: str,
) -> tuple[dict[str, Any], list[str]]:
    out = dict(body)
    notes: list[str] = []
    level = settings.get("effort")
    if level is not None or mode == "adaptive":
        if top in ANTHROPIC_EFFORTS and level != top:
            out["output_config"] = {**settings, "effort": top}
            notes.append(f"effort:{level if level is not None else label}->{top}")
        if budget is None:  # the effort is the level (or adaptive thinking's): that is all
            return out, notes
    wanted = EFFORT_BUDGETS[top]
    if budget == wanted:
        return out, notes
    shown = label if mode is not None else "-"
    choice = body.get("tool_choice")
    if budget is None and isinstance(choice, dict) and choice.get("type") in _FORCED_TOOL:
        notes.append(f"effort:{shown}->unchanged(tool_choice forces a tool)")
        return out, notes
    thinking = body.get("thinking")
    kept = thinking if budget is not None and isinstance(thinking, dict) else {}
    out["thinking"] = {**kept, "type": "enabled", "budget_tokens": wanted}
    notes.append(f"effort:{shown}->{top}(budget {wanted})")
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is int and max_tokens <= wanted:
        out["max_tokens"] = wanted + max_tokens
        notes.append(f"max_tokens raised to {out['max_tokens']} above the thinking budget")
    if budget is None:
        for name in _NOT_WITH_THINKING:
            if name in out:
                del out[name]
                notes.append(f"dropped {name} (not allowed with thinking)")
    return out, notes


def _drop_key(settings: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k != key}


def _with(body: dict[str, Any], name: str, value: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``name`` set to ``value``, or without ``name`` when ``value`` is empty."""
    if value:
        return {**body, name: value}
    return {k: v for k, v in body.items() if k != name}


# --------------------------------------------------------------------------- Gemini
_LEVEL_KEYS = ("thinkingLevel", "thinking_level")
_BUDGET_KEYS = ("thinkingBudget", "thinking_budget")
_GEMINI_LEVELS = {"minimal": "low", "low": "low", "medium": "high", "high": "high", "xhigh": "high"}


def apply_gemini_effort(
    body: dict[str, Any], policy: EffortPolicy, efforts: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """:func:`apply_effort` for a Gemini body's ``generationConfig.thinkingConfig``: its
    ``thinkingLevel``, or its ``thinkingBudget`` read as ``effort_for_budget`` gives it
    (0 and -1, no thinking and dynamic thinking, are no effort). ``drop`` removes the level
    and the budget (``includeThoughts`` stays); ``max`` writes the top level's budget, or
    its level when the client sent a level (Gemini 3's)."""
    config = body.get("generationConfig")
    generation = config if isinstance(config, dict) else {}
    raw = generation.get("thinkingConfig")
    thinking = raw if isinstance(raw, dict) else {}
    # Google's JSON takes proto field names too (the google-genai SDK sends thinking_level)
    level = next((thinking[k] for k in _LEVEL_KEYS if k in thinking), None)
    budget = next((thinking[k] for k in _BUDGET_KEYS if k in thinking), None)
    value: str | None = None
    if isinstance(level, str) and level:
        value = level.lower()
    elif type(budget) is int and budget > 0:
        value = effort_for_budget(budget)
    rest = {k: v for k, v in thinking.items() if k not in _LEVEL_KEYS + _BUDGET_KEYS}

    def written(settings: dict[str, Any]) -> dict[str, Any]:
        return _with(body, "generationConfig", _with(generation, "thinkingConfig", settings))

    if policy is EffortPolicy.DROP:
        if value is None:
            return body, []
        return written(rest), [f"effort:{value}->dropped"]
    if policy is EffortPolicy.MAX and (top := highest(efforts)) is not None:
        if value == top:
            return body, []
        if level is not None:
            settings = {**rest, "thinkingLevel": _GEMINI_LEVELS[top]}
        else:
            settings = {**rest, "thinkingBudget": EFFORT_BUDGETS[top]}
        return written(settings), [f"effort:{value or '-'}->{top}"]
    if value is not None and efforts and value not in efforts:
        return written(rest), [f"effort:{value}->dropped(unsupported)"]
    return body, []
