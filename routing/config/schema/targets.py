"""A group's target: its model, weight, window and the options stored in
``Target.options`` (:func:`target_options`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from routing.config.errors import FieldError
from routing.config.schema.base import StrictModel, raise_all
from routing.config.schema.policies import CircuitPolicyIn
from routing.config.schema.types import ContextWindow, Documented, ModelId, ProviderName

Effort = Literal["minimal", "low", "medium", "high", "xhigh"]


def _unique_efforts(efforts: list[str]) -> list[str]:
    if not efforts:
        raise PydanticCustomError("efforts_empty", "must list at least one effort")
    if len(set(efforts)) != len(efforts):
        raise PydanticCustomError("efforts_repeated", "list each effort once")
    return efforts


class TargetCircuitIn(CircuitPolicyIn):
    """Per-target circuit overrides (SPEC §4): absent fields follow the group's."""


class CapabilitiesIn(StrictModel):
    """What a target's upstream is known to accept (SPEC §16). ``prefill``: an assistant
    message last in the request is continued, not answered (a mid-stream rescue sends the
    partial text that way). Not declared: an Anthropic target is tried (the Messages API
    takes a trailing assistant turn), another is not; a 400 to one is learned."""

    prefill: bool | None = None


class PriceIn(StrictModel):
    """A target's price in currency units per million tokens (operator-entered).
    ``cached_input`` absent: cached input is priced as input."""

    input: float = Field(ge=0, le=1e6)
    output: float = Field(ge=0, le=1e6)
    cached_input: float | None = Field(None, ge=0, le=1e6)


class TargetIn(StrictModel):
    """One target. The options after ``context_window`` (SPEC §4, §13) are stored together
    in ``Target.options`` by :func:`target_options`; absent = the default."""

    # ``_max_needs_efforts``, as the document states it
    model_config = ConfigDict(
        json_schema_extra={
            "if": {
                "properties": {"reasoning_effort": {"const": "max"}},
                "required": ["reasoning_effort"],
            },
            "then": {"properties": {"efforts": {"type": "array"}}, "required": ["efforts"]},
        }
    )

    provider: ProviderName
    model: ModelId
    weight: int = Field(1, ge=1, le=1000)
    enabled: bool = True
    context_window: ContextWindow | None = None
    keep_thinking: bool = False
    break_tool_loop: bool = False
    reasoning_effort: Literal["inherit", "max", "drop"] = "inherit"
    efforts: (
        Annotated[
            list[Effort],
            AfterValidator(_unique_efforts),
            Documented({"minItems": 1, "uniqueItems": True}),
        ]
        | None
    ) = None
    circuit: TargetCircuitIn | None = None
    capabilities: CapabilitiesIn | None = None
    price: PriceIn | None = None

    @model_validator(mode="after")
    def _max_needs_efforts(self) -> TargetIn:
        if self.reasoning_effort == "max" and not self.efforts:
            raise_all(
                [
                    FieldError(
                        "efforts",
                        "reasoning_effort: max needs the efforts this target accepts "
                        "(e.g. [low, medium, high])",
                    )
                ]
            )
        return self


TARGET_OPTIONS: tuple[str, ...] = (
    "keep_thinking",
    "break_tool_loop",
    "reasoning_effort",
    "efforts",
    "circuit",
    "capabilities",
    "price",
)


def target_options(item: TargetIn) -> dict[str, Any]:
    """The options of a validated target as stored in ``Target.options``: only the ones
    that differ from their defaults, so an untouched target stores ``{}``."""
    out: dict[str, Any] = {}
    for name in TARGET_OPTIONS:
        value = getattr(item, name)
        if name in ("circuit", "capabilities", "price"):
            value = value.model_dump(exclude_none=True) if value is not None else None
        if value != TargetIn.model_fields[name].default and value not in (None, {}):
            out[name] = value
    return out
