"""Model-name aliases of groups (SPEC §15): glob patterns such as ``claude-*``.

An agent sends its own model names (``claude-opus-4-8``, ``gpt-5.1-codex``); a group's
``aliases`` let those reach it without client-side configuration. Resolution (in the
compiled routing table, never the database): the exact group name wins, then the group
whose alias matches. Two groups whose aliases could match one same name are refused at
validation, naming both, so at most one group's aliases match any name and the order in
which groups are tried does not matter.

Patterns use ``fnmatch`` syntax, case-sensitive: ``*`` any run, ``?`` one character,
``[...]`` a character set. The overlap check is sound and conservative:

- two literal names overlap when equal;
- a literal and a glob overlap when the glob matches the literal;
- two globs are taken to overlap unless their literal heads (up to the first wildcard)
  or their literal tails (after the last wildcard) contradict each other — one is not a
  prefix (resp. suffix) of the other. ``claude-*`` and ``gpt-*`` never overlap;
  ``claude-*`` and ``*-haiku`` are refused (``claude-3-haiku`` matches both), and so are
  a few pairs that could in fact never meet (``a*b*c`` and ``a*d``) — rename one.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from routing.config.errors import FieldError

_WILD = re.compile(r"[*?\[]")
MAX_ALIASES = 50


def is_glob(pattern: str) -> bool:
    return _WILD.search(pattern) is not None


def matches(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def _head_tail(pattern: str) -> tuple[str, str]:
    first = _WILD.search(pattern)
    head = pattern[: first.start()] if first else pattern
    last = max(pattern.rfind("*"), pattern.rfind("?"), pattern.rfind("]"))
    return head, pattern[last + 1 :]


def could_overlap(a: str, b: str) -> bool:
    """Whether some model name could match both patterns (conservative: may say True for
    a pair that never meets, never False for a pair that does)."""
    if not is_glob(a) and not is_glob(b):
        return a == b
    if not is_glob(a):
        return matches(b, a)
    if not is_glob(b):
        return matches(a, b)
    (head_a, tail_a), (head_b, tail_b) = _head_tail(a), _head_tail(b)
    heads = head_a.startswith(head_b) or head_b.startswith(head_a)
    tails = tail_a.endswith(tail_b) or tail_b.endswith(tail_a)
    return heads and tails


def alias_conflicts(
    groups: Sequence[tuple[str, Sequence[str]]], *, path: str = "groups.{index}.aliases.{alias}"
) -> list[FieldError]:
    """One error per alias (of a later group) that could match an earlier group's alias.

    ``groups``: ``(group name, aliases)`` in order; ``path`` is formatted with the group's
    ``index`` and the alias's index ``alias``.
    """
    errors: list[FieldError] = []
    for index, (name, aliases) in enumerate(groups):
        for alias_index, alias in enumerate(aliases):
            for other, other_aliases in groups[:index]:
                clash = next((o for o in other_aliases if could_overlap(alias, o)), None)
                if clash is not None:
                    errors.append(
                        FieldError(
                            path.format(index=index, alias=alias_index),
                            f"alias {alias!r} of group {name!r} could match the same model "
                            f"names as alias {clash!r} of group {other!r}",
                        )
                    )
                    break
    return errors


def conflicts_with_others(
    name: str, aliases: Sequence[str], others: Iterable[tuple[str, Sequence[str]]]
) -> list[FieldError]:
    """Errors ``aliases.N`` for a group's aliases against every other group's."""
    errors: list[FieldError] = []
    others = [(n, a) for n, a in others if n != name]
    for alias_index, alias in enumerate(aliases):
        for other, other_aliases in others:
            clash = next((o for o in other_aliases if could_overlap(alias, o)), None)
            if clash is not None:
                errors.append(
                    FieldError(
                        f"aliases.{alias_index}",
                        f"alias {alias!r} of group {name!r} could match the same model names "
                        f"as alias {clash!r} of group {other!r}",
                    )
                )
                break
    return errors


def first_match(name: str, table: Sequence[tuple[str, str]]) -> str | None:
    """The group of the first ``(pattern, group)`` whose pattern matches ``name``."""
    for pattern, group in table:
        if pattern == name or (is_glob(pattern) and matches(pattern, name)):
            return group
    return None
