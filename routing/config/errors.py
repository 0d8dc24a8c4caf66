"""Validation errors shared by every configuration write path (file, API, page, admin).

A rejected write raises one :class:`ConfigError` carrying *every* problem found, each
as a :class:`FieldError` keyed by a dotted path (``groups.0.retry.max_retries``, or
``retry.max_retries`` for a policy form). The path is what API responses and form
fields key their messages by; ``""`` means the document as a whole.

Also here, because reads raise it as much as writes: :class:`NotFound` (a named provider,
group, target or key that does not exist) and its base :class:`ServiceError`. The
selectors (reads) raise it without importing the services (writes), which re-export it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one place. Messages never contain credential values."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def prefixed(self, prefix: str) -> FieldError:
        if not prefix:
            return self
        return FieldError(f"{prefix}.{self.path}" if self.path else prefix, self.message)


class ServiceError(Exception):
    """Base of the errors a service refuses a request with (``routing.services``)."""


class NotFound(ServiceError):
    """The named object does not exist."""

    def __init__(self, kind: str, name: object) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"no {kind} {name!r}" if isinstance(name, str) else f"no {kind} {name}")


class ConfigError(Exception):
    """A configuration was rejected; nothing was changed."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: list[FieldError] = _dedupe(errors)
        super().__init__(self.format())

    @classmethod
    def single(cls, path: str, message: str) -> ConfigError:
        return cls([FieldError(path, message)])

    def format(self) -> str:
        """Every error, one per line, in the order found."""
        return "\n".join(str(error) for error in self.errors)

    def by_path(self) -> dict[str, list[str]]:
        """Messages grouped by path (for forms and API error bodies)."""
        grouped: dict[str, list[str]] = {}
        for error in self.errors:
            grouped.setdefault(error.path, []).append(error.message)
        return grouped

    def prefixed(self, prefix: str) -> ConfigError:
        return ConfigError(error.prefixed(prefix) for error in self.errors)


def _dedupe(errors: Iterable[FieldError]) -> list[FieldError]:
    seen: set[FieldError] = set()
    unique: list[FieldError] = []
    for error in errors:
        if error not in seen:
            seen.add(error)
            unique.append(error)
    return unique
