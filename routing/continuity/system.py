"""System messages in the middle of a chat conversation, for a target that refuses them.

Claude Code's Agent tool puts ``system`` messages inside the conversation; a chat target
gets them in place by default (SPEC §20). Many open models' chat templates take one leading
system message only, and their servers answer such a request with a 400 about system
messages. A target that did is learned (``Runtime.no_mid_system``, per process, like a
refused prefill: the request was at fault, so its health is not charged), and from then on
gets each such message folded into the following user turn — the preceding one when no
user turn follows — as a marked note: never a lost instruction.
"""

from __future__ import annotations

from typing import Any

SYSTEM_ROLES = ("system", "developer")
FOLDED = "folded mid-conversation system messages into user turns"


def refuses_mid_system(status: int | None, message: str) -> bool:
    """Whether an upstream's answer is a 400 about system messages."""
    return status == 400 and "system" in message.lower()


def has_mid_system(body: dict[str, Any]) -> bool:
    """Whether a chat request has a system message after its first non-system one."""
    began = False
    for message in body.get("messages") or ():
        role = message.get("role") if isinstance(message, dict) else None
        if role not in SYSTEM_ROLES:
            began = True
        elif began:
            return True
    return False


def note(text: str) -> str:
    return f"[system message: {text}]"


def fold_mid_system(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each system message after the first non-system one folded into the
    following user turn (else the preceding one; else a user turn of its own, in its place)
    as a marked note (:func:`note`). The leading system messages stay."""
    out: list[Any] = []
    pending: list[str] = []
    began = False
    for message in body.get("messages") or ():
        role = message.get("role") if isinstance(message, dict) else None
        if role in SYSTEM_ROLES and began:
            pending.append(note(_text(message.get("content"))))
            continue
        began = began or role not in SYSTEM_ROLES
        if role == "user" and pending:
            message, pending = _with_notes(message, pending, before=True), []
        out.append(message)
    if pending:
        last = max(
            (i for i, m in enumerate(out) if isinstance(m, dict) and m.get("role") == "user"),
            default=None,
        )
        if last is None:
            out.append({"role": "user", "content": "\n\n".join(pending)})
        else:
            out[last] = _with_notes(out[last], pending, before=False)
    return {**body, "messages": out}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def _with_notes(message: dict[str, Any], notes: list[str], *, before: bool) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        parts = [{"type": "text", "text": text} for text in notes]
        return {**message, "content": [*parts, *content] if before else [*content, *parts]}
    text = content if isinstance(content, str) else ""
    joined = [*notes, text] if before else [text, *notes]
    return {**message, "content": "\n\n".join(t for t in joined if t)}
