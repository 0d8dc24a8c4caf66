"""What every schema model shares: the strict bases, the policy-field rules, renamed keys,
and the custom error that carries several field errors out of one validator."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from routing.config.errors import FieldError
from routing.config.fields import policy_of

# Keys from the seed plugins (SPEC §13) and earlier drafts -> what to write instead.
RENAMED_KEYS: dict[str, str] = {
    # seed-shaped chains: a group's ordered targets, addressed by the group's name
    "fallbacks": "targets",
    "chains": "targets",
    "match": "targets",
    "routes": "targets",
    "activeGroup": "name",
    # windows and continuity
    "compactWindow": "compact_window",
    "contextWindow": "context_window",
    "keepThinking": "keep_thinking",
    "breakToolLoop": "break_tool_loop",
    # retries
    "maxRetries": "retry.max_retries",
    "retryableCodes": "retry.retry_codes",
    "backoff": "retry.initial_delay_ms / retry.max_delay_ms / retry.jitter_ratio",
    "initialDelayMs": "retry.initial_delay_ms",
    "maxDelayMs": "retry.max_delay_ms",
    "jitterRatio": "retry.jitter_ratio",
    "switchAfterMs": "retry.switch_after_ms",
    "retry_codes": "retry.retry_codes",
    "max_retries": "retry.max_retries",
    # switching and cooling
    "switchCodes": "switch_codes",
    "fallback_codes": "switch_codes",
    "failureThreshold": "circuit.failure_threshold",
    "failure_threshold": "circuit.failure_threshold",
    "cooldownMs": "circuit.cooldown_base_ms",
    "cooldown_ms": "circuit.cooldown_base_ms",
    "quarantineBaseMs": "circuit.cooldown_base_ms",
    "quarantineCapMs": "circuit.cooldown_cap_ms",
}


MULTI_ERROR = "switchyard_multi"  # custom error type carrying several FieldErrors


def renamed_message(key: str) -> str:
    return f"`{key}` was renamed: write `{RENAMED_KEYS[key]}` instead"


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, hide_input_in_errors=True)


class PolicyBlock(StrictModel):
    """Base of the policy models: renamed keys are reported inside these only.

    The rules below read each field's :class:`~routing.config.fields.Policy`: an explicit
    ``null`` is accepted only where the built-in default is ``None`` ("not declared"), and
    a field with ``not_below`` must not be smaller than that sibling.
    """

    @field_validator("*", mode="after")
    @classmethod
    def _declared_rules(cls, value: Any, info: ValidationInfo) -> Any:
        policy = policy_of(cls.model_fields[info.field_name]) if info.field_name else None
        if value is None and (policy is None or policy.default is not None):
            raise PydanticCustomError(
                "null", "must not be null: leave the key out to inherit the lower layer"
            )
        if policy is not None and policy.not_below:
            _ordered(policy.not_below, value, info)
        return value


def _ordered(low_field: str, value: int | None, info: ValidationInfo) -> int | None:
    low = info.data.get(low_field)
    if value is not None and low is not None and low > value:
        raise PydanticCustomError(
            "order", "must be >= {low_field} ({low})", {"low_field": low_field, "low": low}
        )
    return value


def raise_all(errors: list[FieldError]) -> None:
    if errors:
        raise PydanticCustomError(
            MULTI_ERROR,
            "{summary}",
            {
                "summary": "; ".join(map(str, errors)),
                "errors": [(e.path, e.message) for e in errors],
            },
        )
