"""A refusal as the door's answer: HTTP 429 in its own shape (SPEC §17).

OpenAI doors: ``{"error": {"type": "rate_limit_error" | "budget_exceeded", "code": ...}}``;
the Messages door: Anthropic's ``rate_limit_error`` (its shape for a 429). ``Retry-After``
says when the window frees. ``x-should-retry`` tells the official SDKs whether waiting
helps: yes for rpm, tpm and concurrency (they retry after Retry-After), no for budgets,
session caps and loops (a retry would only be refused again).
"""

from __future__ import annotations

from routing.gateway.replies import ErrorReply
from routing.limits.rules import LimitCode, Refusal
from routing.protocols import Protocol

STATUS = 429


def refusal_reply(
    refusal: Refusal, *, now: float, door: Protocol, headers: dict[str, str]
) -> ErrorReply:
    out = dict(headers)
    retry_after = refusal.retry_after_s(now)
    if retry_after is not None:
        out["retry-after"] = str(retry_after)
    out["x-should-retry"] = "true" if refusal.retryable else "false"
    out["x-switchyard-limit"] = refusal.name
    kind = (
        "rate_limit_error"
        if refusal.code in (LimitCode.RPM, LimitCode.TPM, LimitCode.CONCURRENCY)
        else "budget_exceeded"
    )
    return ErrorReply(
        status=STATUS,
        message=refusal.message(),
        code=refusal.code.value,
        type=kind,
        headers=out,
        door=door,
    )
