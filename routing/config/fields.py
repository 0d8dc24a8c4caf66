"""Policy field metadata: each policy field is declared once, on the configuration schema.

A policy field is a field of ``routing.config.schema.PolicyIn`` (or of one of its blocks,
``retry:`` and ``circuit:``) whose annotation carries a :class:`Policy`::

    max_retries: Annotated[int | None, Policy(5)] = Field(
        None, ge=0, le=20, title="Max retries", description="In-place retries of one ..."
    )

One declaration holds everything about the field. Pydantic's own slots hold what pydantic
understands (type, range, title, help), so validation and the documented schema read the
same words as the page; :class:`Policy` adds what pydantic has no slot for: the built-in
default, the unit, the form section, the input step and the ordering rule.

Derived from it, never written again:

- the flat dotted field list, built-in defaults and ordered pairs
  (``routing.config.policy``), hence layer resolution and the ``fields`` of the API;
- which fields accept ``null`` (those whose built-in default is ``None``: "not declared"),
  in validation and in the documented API schema;
- the page's form rows (``dashboard.policy_form``);
- the engine's values (:func:`routing.config.policy.engine_values`). The engine is
  stdlib-only and keeps its own dataclass defaults; a test holds them to the declared ones.

Decision: the metadata rides on the schema model rather than in a separate table, so a
field cannot exist in one without the other (ninja's ``Settings`` model, pydantic's
``model_fields``).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

Kind = Literal["choice", "codes", "int", "float", "optional_int", "optional_float"]


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: defaults may be lists
class Policy:
    """What the policy layers need to know about a field beyond its pydantic type.

    ``default`` is the built-in layer's value (SPEC §5); ``None`` means "not declared" and
    makes an explicit ``null`` acceptable. ``section`` (the form's) defaults to the block
    model's ``SECTION`` class variable. ``step`` is the number input's step for floats.
    ``not_below`` names a sibling field this one must not be smaller than.
    """

    default: Any
    unit: str = ""
    section: str = ""
    step: str = ""
    not_below: str = ""


@dataclass(frozen=True, slots=True)
class DeclaredField:
    """One policy field as declared: its dotted name, pydantic field and metadata."""

    name: str  # dotted: "retry.max_retries"
    field: FieldInfo
    policy: Policy
    section: str

    @property
    def leaf(self) -> str:
        return self.name.rpartition(".")[2]

    @property
    def block(self) -> str:
        """``"retry"`` for ``retry.max_retries``; ``""`` for a top-level field."""
        return self.name.rpartition(".")[0]

    @property
    def title(self) -> str:
        return self.field.title or self.leaf

    @property
    def help(self) -> str:
        return self.field.description or ""

    @property
    def default(self) -> Any:
        return self.policy.default

    @property
    def nullable(self) -> bool:
        return self.policy.default is None

    @property
    def choices(self) -> tuple[str, ...]:
        """The values of a ``Literal`` field; ``()`` for the others."""
        literal = _literal(self.field.annotation)
        return tuple(str(arg) for arg in get_args(literal)) if literal is not None else ()

    @property
    def kind(self) -> Kind:
        """How the field is typed in, from its annotation: a choice (a ``Literal`` or a
        name), a list of failure codes, or a number (``optional_int``: empty = null)."""
        base = _without_none(self.field.annotation)
        if _literal(base) is not None or base is str:
            return "choice"
        if get_origin(base) is list:
            return "codes"
        if base is int:
            return "optional_int" if self.nullable else "int"
        if base is float:
            return "optional_float" if self.nullable else "float"
        raise TypeError(f"{self.name}: no form kind for {self.field.annotation!r}")


def policy_of(field: FieldInfo) -> Policy | None:
    return next((item for item in field.metadata if isinstance(item, Policy)), None)


def nullable_fields(model: type[BaseModel]) -> frozenset[str]:
    """Fields of ``model`` that accept ``null``: those declared with a ``None`` default."""
    return frozenset(
        name
        for name, field in model.model_fields.items()
        if (policy := policy_of(field)) is not None and policy.default is None
    )


def block_model(field: FieldInfo) -> type[BaseModel] | None:
    """The policy block model a field holds (``retry: RetryPolicyIn | None``), if any."""
    for arg in (field.annotation, *get_args(field.annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def declared_fields(model: type[BaseModel], prefix: str = "") -> tuple[DeclaredField, ...]:
    """Every policy field of ``model`` and its blocks, in declaration order, dotted."""
    out: list[DeclaredField] = []
    for name, field in model.model_fields.items():
        policy = policy_of(field)
        if policy is not None:
            section = policy.section or str(getattr(model, "SECTION", ""))
            out.append(DeclaredField(f"{prefix}{name}", field, policy, section))
            continue
        block = block_model(field)
        if block is not None:
            out.extend(declared_fields(block, f"{prefix}{name}."))
    return tuple(out)


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:
            return _without_none(rest[0])
    if hasattr(annotation, "__metadata__"):  # Annotated[T, ...]
        return _without_none(get_args(annotation)[0])
    return annotation


def _literal(annotation: Any) -> Any:
    base = _without_none(annotation)
    return base if get_origin(base) is Literal else None
