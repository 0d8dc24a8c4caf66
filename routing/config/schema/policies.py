"""The policy fields, each declared once with its :class:`~routing.config.fields.Policy`
metadata (``routing/config/fields.py``): the retry and circuit blocks, limits, session
limits and :class:`PolicyIn`, the keys a group or the ``defaults:`` block may set."""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from routing.config.errors import FieldError
from routing.config.fields import Policy
from routing.config.schema.base import PolicyBlock, raise_all
from routing.config.schema.types import AlgorithmName, CodeList, ContextWindow
from routing.engine.failures import DEFAULT_RETRY_CODES, DEFAULT_SWITCH_CODES, FailureCode


def _codes(codes: Collection[FailureCode]) -> list[str]:
    """A code set as the layers store it: sorted values."""
    return sorted(code.value for code in codes)


class RetryPolicyIn(PolicyBlock):
    """In-place retries of one target. All fields optional (layers fill the rest)."""

    SECTION: ClassVar[str] = "Retry policy"

    max_retries: Annotated[int | None, Policy(5)] = Field(
        None,
        ge=0,
        le=20,
        title="Max retries",
        description="In-place retries of one target per call.",
    )
    retry_codes: Annotated[CodeList | None, Policy(_codes(DEFAULT_RETRY_CODES))] = Field(
        None,
        title="Retry codes",
        description="Failures that retry the same target in place.",
    )
    initial_delay_ms: Annotated[int | None, Policy(500, unit="ms")] = Field(
        None, ge=0, le=600_000, title="Initial delay"
    )
    max_delay_ms: Annotated[int | None, Policy(10_000, unit="ms", not_below="initial_delay_ms")] = (
        Field(
            None,
            ge=0,
            le=3_600_000,
            title="Max delay",
            description="A Retry-After beyond this switches at once.",
        )
    )
    jitter_ratio: Annotated[float | None, Policy(0.1, step="0.01")] = Field(
        None, ge=0, le=1, title="Jitter", description="± fraction of each delay."
    )
    switch_after_ms: Annotated[int | None, Policy(2_000, unit="ms")] = Field(
        None,
        ge=0,
        le=3_600_000,
        title="Switch after",
        description=(
            "While another target is eligible, stop retrying in place once the time on "
            "the target (its attempts and the waits between them) would pass this, and "
            "switch. The last eligible target keeps every retry."
        ),
    )


class CircuitPolicyIn(PolicyBlock):
    """Cooling parameters. All fields optional."""

    SECTION: ClassVar[str] = "Circuit and cooldown"

    failure_threshold: Annotated[int | None, Policy(1)] = Field(
        None,
        ge=1,
        le=1000,
        title="Failure threshold",
        description="Consecutive failed calls that start cooling a target.",
    )
    cooldown_base_ms: Annotated[int | None, Policy(10_000, unit="ms")] = Field(
        None,
        ge=0,
        le=86_400_000,
        title="Cooldown",
        description="First cooling period; doubles on each new opening.",
    )
    cooldown_cap_ms: Annotated[
        int | None, Policy(600_000, unit="ms", not_below="cooldown_base_ms")
    ] = Field(None, ge=0, le=86_400_000, title="Cooldown cap")


class LimitsIn(PolicyBlock):
    """Rate limits and calendar budgets (SPEC §17) of a group, or of a key (the same
    fields, validated by this model on every path). Absent = no such limit; 0 refuses
    every call (a kill switch). Day and month are UTC calendar windows."""

    SECTION: ClassVar[str] = "Limits and budgets"

    rpm: Annotated[int | None, Policy(None, unit="calls/min")] = Field(
        None, ge=0, le=10_000_000, title="Requests per minute"
    )
    tpm: Annotated[int | None, Policy(None, unit="tokens/min")] = Field(
        None, ge=0, le=10_000_000_000, title="Tokens per minute"
    )
    concurrency: Annotated[int | None, Policy(None, unit="calls")] = Field(
        None, ge=0, le=1_000_000, title="Concurrency", description="Calls in flight at once."
    )
    tokens_per_day: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Tokens per day", description="UTC calendar day."
    )
    cost_per_day: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Cost per day", description="In the targets' price currency."
    )
    tokens_per_month: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Tokens per month", description="UTC calendar month."
    )
    cost_per_month: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Cost per month"
    )


LIMIT_NAMES: tuple[str, ...] = tuple(LimitsIn.model_fields)


class SessionLimitsIn(PolicyBlock):
    """What one session (the affinity key) may use in a group, over its whole life."""

    SECTION: ClassVar[str] = "Limits and budgets"

    tokens: Annotated[int | None, Policy(None, unit="tokens")] = Field(
        None, ge=0, le=10**15, title="Session tokens"
    )
    cost: Annotated[float | None, Policy(None, step="0.01")] = Field(
        None, ge=0, le=1e12, title="Session cost"
    )
    calls: Annotated[int | None, Policy(None, unit="calls")] = Field(
        None, ge=0, le=10**9, title="Session calls"
    )


class PolicyIn(PolicyBlock):
    """The policy keys a group (or the ``defaults:`` block) may set."""

    SECTION: ClassVar[str] = "Routing"

    algorithm: Annotated[AlgorithmName | None, Policy("priority")] = Field(
        None,
        title="Algorithm",
        description="How the next target is chosen among the healthy ones (or the dotted path "
        "of a RoutingAlgorithm subclass).",
    )
    switch_codes: Annotated[
        CodeList | None, Policy(_codes(DEFAULT_SWITCH_CODES), section="Switch codes")
    ] = Field(
        None,
        title="Switch codes",
        description="Failures that allow moving on to the next target.",
    )
    retry: RetryPolicyIn | None = None
    circuit: CircuitPolicyIn | None = None
    commit: Annotated[Literal["first-content", "complete"] | None, Policy("first-content")] = Field(
        None,
        title="Commit point",
        description="When the answer starts flowing to the client (failover is "
        "invisible before it).",
    )
    resume: Annotated[Literal["off", "continuation", "restart"] | None, Policy("off")] = Field(
        None,
        title="Mid-stream rescue",
        description="continuation: a stream cut or stalled after the commit point while "
        "producing text continues on the next eligible target that takes a prefill (never "
        "spliced); restart: else restarts there and relays only a byte-identical "
        "reproduction's surplus (deterministic upstreams only).",
    )
    context_window: Annotated[ContextWindow | None, Policy(None, unit="tokens")] = Field(
        None,
        title="Context window",
        description="Declared in /v1/models; empty = none declared.",
    )
    compact_window: Annotated[ContextWindow | None, Policy(None, unit="tokens")] = Field(
        None,
        title="Compaction point",
        description="Declares max(ceil(T*1.25), T+65536) so agents compact near T; "
        "exclusive with the context window.",
    )
    hosted_tools: Annotated[Literal["drop", "skip"] | None, Policy("drop")] = Field(
        None,
        title="Hosted tools",
        description="A target that cannot run the request's hosted tools (web search…): "
        "drop = it gets the request without them (noted), skip = it is skipped.",
    )
    deadline_s: Annotated[float | None, Policy(300.0, unit="s")] = Field(
        None,
        ge=1,
        le=3600,
        title="Call deadline",
        description="Bounds retries and switches of one call together.",
    )
    limits: LimitsIn | None = None
    session_limits: SessionLimitsIn | None = None
    loop_guard: Annotated[int | None, Policy(None, section="Limits and budgets")] = Field(
        None,
        ge=1,
        le=1000,
        title="Loop guard",
        description="A session sending the same request body this many times in a row "
        "is stopped at the next one; empty = off.",
    )

    @model_validator(mode="after")
    def _one_window(self) -> PolicyIn:
        if self.context_window is not None and self.compact_window is not None:
            raise_all(
                [
                    FieldError(
                        "compact_window",
                        "exclusive with context_window: declare the window, or the "
                        "compaction point it is derived from, not both",
                    )
                ]
            )
        return self


POLICY_KEYS: tuple[str, ...] = tuple(PolicyIn.model_fields)


def policy_models() -> list[type[PolicyBlock]]:
    """Every model that follows the policy rules (:class:`PolicyBlock` and below):
    ``PolicyIn``, its blocks, ``GroupIn`` and the per-target circuit."""
    found: list[type[PolicyBlock]] = []
    todo = list(PolicyBlock.__subclasses__())
    while todo:
        model = todo.pop(0)
        if model not in found:
            found.append(model)
            todo.extend(model.__subclasses__())
    return found
