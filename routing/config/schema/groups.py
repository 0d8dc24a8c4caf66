"""A group (policy keys inline, targets in order, aliases) and the whole config file."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, PrivateAttr, model_validator

from routing.config.schema.base import StrictModel, raise_all, short
from routing.config.schema.policies import PolicyIn
from routing.config.schema.providers import ProviderIn
from routing.config.schema.references import cross_check, duplicate_targets
from routing.config.schema.targets import TargetIn
from routing.config.schema.types import Documented, GroupName, ModelId, printable_ascii


def _aliases(aliases: list[str]) -> list[str]:
    from routing.config.aliases import MAX_ALIASES

    if len(aliases) > MAX_ALIASES:
        raise ValueError(f"at most {MAX_ALIASES} aliases")
    seen: set[str] = set()
    for alias in aliases:
        if not printable_ascii(alias) or " " in alias:
            raise ValueError(f"alias {short(alias)} must be printable ASCII without spaces")
        if alias in seen:
            raise ValueError(f"alias {short(alias)} is listed twice")
        seen.add(alias)
    return aliases


# printable ASCII without spaces, at most MAX_ALIASES, no repeats (what ``_aliases`` checks)
ALIAS_PATTERN = r"^[\x21-\x7e]+$"
Aliases = Annotated[
    list[ModelId],
    AfterValidator(_aliases),
    Documented(
        {
            "items": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": ALIAS_PATTERN},
            "maxItems": 50,
            "uniqueItems": True,
        }
    ),
]


class GroupIn(PolicyIn):
    """A group: its name, targets in order, model-name ``aliases`` (globs, SPEC §15) and
    the policy keys inline (SPEC §11)."""

    name: GroupName
    aliases: Aliases = Field(
        default_factory=list,
        title="Aliases",
        description="Model names (globs such as claude-*) that also reach this group.",
    )
    targets: list[TargetIn] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_duplicate_targets(self) -> GroupIn:
        raise_all(duplicate_targets([t.model_dump() for t in self.targets]))
        return self


class ConfigFileIn(StrictModel):
    """The whole config file: the composition layer.

    ``unset_credentials`` (set by the loader, not part of the document): providers whose
    ``api_key: ${VAR}`` names an unset variable, ``{provider: VAR}``; they keep the stored
    credential.
    """

    defaults: PolicyIn | None = None
    providers: list[ProviderIn] = Field(default_factory=list)
    groups: list[GroupIn] = Field(default_factory=list)
    _unset_credentials: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def unset_credentials(self) -> dict[str, str]:
        return self._unset_credentials

    @unset_credentials.setter
    def unset_credentials(self, value: dict[str, str]) -> None:
        self._unset_credentials = dict(value)

    @model_validator(mode="after")
    def _references(self) -> ConfigFileIn:
        raise_all(cross_check(self.model_dump()))
        return self
