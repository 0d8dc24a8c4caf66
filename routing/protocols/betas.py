"""Which ``anthropic-beta`` values reach a provider (SPEC §15): its ``betas`` setting.

A Messages client (Claude Code) names the betas it relies on in one comma-separated
``anthropic-beta`` header; an anthropic-kind target gets the header as sent, except what
the provider's ``betas: {allow, strip}`` removes: ``allow`` given → only those pass;
``strip`` → never. Each removed beta is a rewrite note (``stripped beta <name>``).
"""

from __future__ import annotations

from collections.abc import Mapping

HEADER = "anthropic-beta"


def filter_betas(
    headers: Mapping[str, str],
    allow: frozenset[str] | None,
    strip: frozenset[str],
) -> tuple[dict[str, str], list[str]]:
    """``headers`` with the provider's betas only, and one note per beta removed."""
    out = dict(headers)
    sent = out.get(HEADER)
    if sent is None or (allow is None and not strip):
        return out, []
    kept: list[str] = []
    notes: list[str] = []
    for beta in (b.strip() for b in sent.split(",")):
        if not beta:
            continue
        if beta in strip or (allow is not None and beta not in allow):
            notes.append(f"stripped beta {beta}")
        else:
            kept.append(beta)
    if kept:
        out[HEADER] = ",".join(kept)
    else:
        del out[HEADER]
    return out, notes
