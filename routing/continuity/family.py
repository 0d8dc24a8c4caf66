"""One Claude under every cloud's name for it: the model family continuity compares by.

The same Claude is named differently by each place that serves it (SPEC §19):

=========================  ================================================================
Anthropic API              ``claude-opus-4-8``, ``claude-opus-4-5-20251101``
Amazon Bedrock             ``anthropic.claude-opus-4-8-v1:0``; inference profiles
                           ``us.anthropic.…``, ``eu.anthropic.…``, ``global.anthropic.…``; an
                           ARN ending in either (``…:foundation-model/anthropic.…``,
                           ``…:inference-profile/us.anthropic.…``)
Google Vertex AI           ``claude-opus-4-8@20251101`` (``publishers/anthropic/models/…``)
=========================  ================================================================

Anthropic documents that a thinking block's ``signature`` is valid across these platforms
("signature values are compatible across platforms (Claude APIs, Amazon Bedrock, and
Vertex AI). Values generated on one platform will be compatible with another", the
extended-thinking guide), so a turn Claude wrote on one of them keeps its signed thinking
when the same model answers on another. Amazon's and Google's pages say to pass thinking
blocks back unchanged and do not speak to other platforms; Anthropic's statement is the one
relied on.

Two names are one family when they reduce to the same ``claude-…`` base and their snapshot
dates agree, a name without a date (``claude-opus-4-8``, ``…-v1:0``) standing for the one
snapshot of that model version. Anything else — another vendor's model, an application
inference profile's opaque ARN, an alias such as ``…-latest`` that may move between
snapshots, a name with a suffix this reader does not know, another gateway's path such as
``anthropic/claude-…`` (whatever serves it is not known) — has no family, and section 13's
strict rule (same provider, same model) holds for it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

_CLAUDE_ID = re.compile(
    r"""
    (?:(?:[a-z][a-z-]*\.)?anthropic\.)?   # Bedrock: [geography.]anthropic.
    (?P<base>claude-[a-z0-9.-]+?)
    (?:[-@](?P<date>\d{8}))?              # a snapshot date: -20251101 or Vertex's @20251101
    (?:-v\d+(?::\d+)?)?                   # Bedrock's model version: -v1:0
    """,
    re.VERBOSE,
)
_VERTEX_PATH = "publishers/anthropic/models/"


class Family(NamedTuple):
    """A Claude model version, and its snapshot date when the name carries one."""

    base: str
    date: str | None


@lru_cache(maxsize=4096)
def model_family(model: str) -> Family | None:
    """The Claude family ``model`` names on any platform; None when it is not one."""
    name = model.strip().lower()
    if name.startswith("arn:") or _VERTEX_PATH in name:
        name = name.rsplit("/", 1)[-1]  # the model an ARN or a Vertex resource path ends in
    match = _CLAUDE_ID.fullmatch(name)
    if match is None or match["base"].endswith("-latest"):
        return None  # a moving alias may name another snapshot tomorrow
    return Family(match["base"], match["date"])


def same_family(one: str, other: str) -> bool:
    """Whether two model names are the same Claude (so its signed thinking carries over)."""
    first, second = model_family(one), model_family(other)
    if first is None or second is None or first.base != second.base:
        return False
    return first.date is None or second.date is None or first.date == second.date
