"""What a translated leg does with each top-level request field (SPEC §12, honest limits).

Every translation declares the fields it knows in a table, one ``Rule`` per key:

- ``MAPPED``: carried over to the other protocol by the translator;
- ``DROPPED``: no counterpart, and losing it still leaves a valid answer to the same
  request (sampling taste, caching and latency hints, metadata, limits on things a
  translated request cannot contain): left out and noted ``dropped <key>`` in
  ``x-switchyard-rewrites``;
- ``REFUSED``: asks for something the answer is bound to and the target's kind cannot
  give (a structured-output format, tools the provider runs itself, several choices, a
  background response). ``Unmappable`` → a 400 before any upstream is called. A refused
  field may have harmless values (``n: 1``, ``background: false``): those pass.

A key no table knows is dropped and noted, like a ``DROPPED`` one: the client sees it in
the header, and a field an SDK starts sending tomorrow does not break failover across
kinds. A ``null`` value asks for nothing and is neither noted nor refused. A rule may hold
a ``nested`` table for an object field whose parts differ (``output_config.effort`` is
mapped, ``output_config.format`` refused); notes and params then name ``field.part``.

Tables are checked only on translated legs: a pass-through keeps every field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from routing.protocols import Unmappable


class Handling(Enum):
    MAPPED = "mapped"
    DROPPED = "dropped"
    REFUSED = "refused"


def _never(value: Any) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Rule:
    handling: Handling
    asks_for: str = ""  # REFUSED: what the field asks for, in the 400's message
    harmless: Callable[[Any], bool] = _never  # REFUSED: values that ask for nothing
    nested: Mapping[str, Rule] | None = None  # an object field checked part by part


MAPPED = Rule(Handling.MAPPED)
DROPPED = Rule(Handling.DROPPED)
Table = Mapping[str, Rule]


def refused(asks_for: str, harmless: Callable[[Any], bool] = _never) -> Rule:
    return Rule(Handling.REFUSED, asks_for, harmless)


def mapped_parts(parts: Table) -> Rule:
    return Rule(Handling.MAPPED, nested=parts)


def is_false(value: Any) -> bool:
    return value is False


# Chat Completions fields neither Messages nor Responses has: a translated leg refuses them
# unless their value asks for nothing beyond one plain text answer.
CHAT_ONLY: Table = {
    "n": refused("several choices", harmless=lambda v: v == 1),
    "logprobs": refused("log probabilities", harmless=is_false),
    "top_logprobs": refused("log probabilities", harmless=lambda v: v == 0),
    "audio": refused("audio output"),
    "modalities": refused("audio output", harmless=lambda v: v == ["text"]),
    "web_search_options": refused("a web search the provider runs itself"),
    "functions": refused("legacy function calling (send 'tools' instead)"),
    "function_call": refused("legacy function calling (send 'tool_choice' instead)"),
}


# Chat Completions fields both Messages and Responses have a place for: a translation from
# the canonical view maps them all (``stream_options`` asks for usage, which both kinds'
# streams always carry).
CHAT_MAPPED: Table = dict.fromkeys(
    (
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "user",
    ),
    MAPPED,
)

# Chat Completions fields neither has, whose loss leaves the same answer: sampling taste, a
# latency hint (``prediction``), and ``store`` (neither target stores: the gateway sends
# Responses ``store: false``).
CHAT_DROPPED: Table = dict.fromkeys(
    ("frequency_penalty", "presence_penalty", "seed", "logit_bias", "store", "prediction"),
    DROPPED,
)


# Chat Completions (and Responses) request hints the other kinds have no place for, whose
# loss leaves the same answer: a service tier, client metadata, cache and safety keys.
CHAT_HINTS_DROPPED: Table = dict.fromkeys(
    (
        "service_tier",
        "metadata",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "verbosity",
    ),
    DROPPED,
)


def check(table: Table, body: Mapping[str, Any], *, target: str, prefix: str = "") -> list[str]:
    """The notes for ``body``'s dropped fields; raises ``Unmappable`` for a refused one.

    ``target`` names who cannot take a refused field, e.g. "anthropic targets"."""
    notes: list[str] = []
    for key, value in body.items():
        if value is None:
            continue
        name = prefix + key
        rule = table.get(key)
        if rule is None or rule.handling is Handling.DROPPED:
            notes.append(f"dropped {name}")
        elif rule.handling is Handling.REFUSED:
            if not rule.harmless(value):
                raise Unmappable(
                    f"'{name}' asks for {rule.asks_for}, which {target} cannot give; "
                    "send it to a group whose targets speak the same protocol, or leave it out.",
                    param=name,
                )
        elif rule.nested is not None and isinstance(value, Mapping):
            notes += check(rule.nested, value, target=target, prefix=name + ".")
    return notes
