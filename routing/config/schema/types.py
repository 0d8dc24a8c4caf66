"""The field types: names, URLs, model ids, failure codes, algorithms, windows, timeouts.

Each is an ``Annotated`` type with its validator and the JSON Schema keywords stating what
it checks (:class:`Documented`), so the API document promises what validation accepts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from pydantic import AfterValidator, BeforeValidator, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from routing.conf import switchyard_settings
from routing.config.schema.base import short
from routing.engine.addresses import METADATA_HOSTS, metadata_host
from routing.engine.algorithms import ALGORITHMS, UnknownAlgorithm, get_algorithm
from routing.engine.failures import FailureCode

GROUP_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z"  # \Z: "$" would accept a trailing newline
PROVIDER_NAME_RE = r"^[-a-zA-Z0-9_]{1,50}\Z"  # Django's slug, within SlugField's length
MAX_CONTEXT_WINDOW = 10_000_000
_url_validator = URLValidator(schemes=["http", "https"])


@dataclass(frozen=True, eq=False)  # hashed by identity: typing dedupes Union members
class Documented:
    """JSON Schema keywords stating what a validator checks, so the API document (and a
    schema-driven client or fuzzer) knows what a valid value is. Validation stays the
    validator's, with its own messages; ``keywords`` may be a callable, read when the
    schema is generated (for values that come from settings)."""

    keywords: Mapping[str, Any] | Callable[[], Mapping[str, Any]]

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(self.keywords() if callable(self.keywords) else self.keywords)
        return schema


# A URL Django's URLValidator accepts: http(s), a host name with a top-level domain, an
# IPv4 address or localhost, an optional port and a plain path (a subset: what the
# document promises is always accepted).
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
URL_PATTERN = (
    rf"^https?://(localhost|{_OCTET}(\.{_OCTET}){{3}}|({_LABEL}\.){{1,4}}[a-z]{{2,10}})"
    r"(:[0-9]{1,5})?(/[-A-Za-z0-9._~%/]*)?$"
)


def _failure_code(value: Any) -> FailureCode:
    if isinstance(value, FailureCode):
        return value
    if isinstance(value, str) and value in FailureCode.__members__:
        return FailureCode(value)
    hint = ""
    if isinstance(value, str) and value.upper() in FailureCode.__members__:
        hint = f" (codes are upper-case: write {value.upper()})"
    raise PydanticCustomError(
        "failure_code",
        "unknown failure code {code}{hint}; known codes: {known}",
        {"code": short(value), "hint": hint, "known": ", ".join(FailureCode.__members__)},
    )


def _unique_codes(codes: list[FailureCode]) -> list[FailureCode]:
    if not codes:
        raise PydanticCustomError("codes_empty", "must list at least one failure code")
    seen: set[FailureCode] = set()
    repeated: list[str] = []
    for code in codes:
        if code in seen and code.value not in repeated:
            repeated.append(code.value)
        seen.add(code)
    if repeated:
        raise PydanticCustomError(
            "codes_repeated", "repeats {codes}: list each code once", {"codes": ", ".join(repeated)}
        )
    return codes


def extra_algorithms() -> Mapping[str, str]:
    """Operator-registered algorithms: ``settings.SWITCHYARD["ALGORITHMS"]`` (name -> path)."""
    return dict(switchyard_settings().ALGORITHMS)


def _algorithm(name: str) -> str:
    # Only built-in and registered algorithms (SWITCHYARD_ALGORITHMS, by name or by its
    # path) are accepted; any other name is refused without an import, so writing a group
    # runs no code and learns nothing of which modules exist. A registered one must import
    # and be a RoutingAlgorithm now, on write: a group that cannot compile is refused
    # instead of breaking the routing table.
    if name in ALGORITHMS:
        return name
    extra = extra_algorithms()
    if name in extra or name in extra.values():
        try:
            get_algorithm(name, extra)
        except UnknownAlgorithm as exc:
            raise PydanticCustomError(
                "algorithm_unusable", "{problem}", {"problem": str(exc)}
            ) from None
        return name
    raise PydanticCustomError(
        "unknown_algorithm",
        "unknown algorithm {name}; use one of {choices} (another algorithm must first be "
        "registered in SWITCHYARD_ALGORITHMS)",
        {"name": short(name), "choices": ", ".join([*ALGORITHMS, *extra])},
    )


def _base_url(value: str) -> str:
    try:
        _url_validator(value)
    except DjangoValidationError:
        raise PydanticCustomError("url", "must be an http:// or https:// URL") from None
    if "?" in value or "#" in value:
        raise PydanticCustomError(
            "url",
            "must not carry a query (?) or a fragment (#): the gateway appends each "
            "endpoint's path to it",
        )
    host = urlsplit(value).hostname or ""
    if metadata_host(host):
        raise PydanticCustomError(
            "url",
            "{host} is a cloud metadata service, never an upstream (private and loopback "
            "addresses are fine)",
            {"host": short(host)},
        )
    return value


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _model_id(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise PydanticCustomError("blank", "must be non-empty, without surrounding spaces")
    if _CONTROL.search(value):
        # no provider names a model with one, and PostgreSQL cannot store a NUL
        raise PydanticCustomError("control", "must not contain control characters")
    return value


def printable_ascii(value: str) -> bool:
    """What an HTTP header can carry as-is: printable ASCII (space to ``~``) only."""
    return all(" " <= ch <= "~" for ch in value)


def _provider_name(value: str) -> str:
    if not re.match(PROVIDER_NAME_RE, value):
        raise PydanticCustomError("name", "use 1-50 letters, digits, dashes or underscores")
    return value


def _group_name(value: str) -> str:
    if not re.match(GROUP_NAME_RE, value):
        raise PydanticCustomError(
            "name",
            "use 1-100 letters, digits, dots, dashes or underscores, "
            "starting with a letter or digit",
        )
    return value


FailureCodeIn = Annotated[FailureCode, BeforeValidator(_failure_code)]
CodeList = Annotated[
    list[FailureCodeIn],
    AfterValidator(_unique_codes),
    Documented({"minItems": 1, "uniqueItems": True}),
]
# Documented as the names it takes (a registered algorithm's path is accepted too).
AlgorithmName = Annotated[
    str,
    AfterValidator(_algorithm),
    Documented(lambda: {"enum": [*ALGORITHMS, *extra_algorithms()]}),
]
ProviderName = Annotated[str, AfterValidator(_provider_name)]
GroupName = Annotated[str, AfterValidator(_group_name)]
PRINTABLE_ASCII_PATTERN = "^[ -~]*$"


# not blank, no surrounding spaces, no control characters (what ``_model_id`` checks)
MODEL_ID_PATTERN = r"^[^\s\x00-\x1f\x7f-\x9f]([^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$"
ModelId = Annotated[
    str,
    Field(min_length=1, max_length=200),
    AfterValidator(_model_id),
    Documented({"pattern": MODEL_ID_PATTERN}),
]
# What ``_base_url`` refuses among the URLs ``URL_PATTERN`` describes: metadata services.
METADATA_URL_PATTERN = (
    r"^https?://(169\.254\.[0-9.]+|100\.100\.100\.200|"
    + "|".join(sorted(h.replace(".", r"\.") for h in METADATA_HOSTS if "." in h))
    + r")(:[0-9]*)?(/.*)?$"
)
BaseUrl = Annotated[
    str,
    Field(max_length=500),
    AfterValidator(_base_url),
    Documented({"pattern": URL_PATTERN, "not": {"pattern": METADATA_URL_PATTERN}}),
]


def _base_url_or_none(value: str) -> str:
    return value if value == "" else _base_url(value)


# A provider's endpoint: "" leaves it to the platform (SPEC §19), which says when it must
# be given (``routing.platforms.base.PlatformSpec.check``).
OptionalBaseUrl = Annotated[
    str,
    Field(max_length=500),
    AfterValidator(_base_url_or_none),
    Documented({"pattern": f"(^$)|({URL_PATTERN})", "not": {"pattern": METADATA_URL_PATTERN}}),
]
ContextWindow = Annotated[int, Field(ge=1, le=MAX_CONTEXT_WINDOW)]
TimeoutSeconds = Annotated[float, Field(ge=0.1, le=3600)]
MIN_HEALTH_CHECK_S = 1.0  # the checker's tick: a shorter interval would not check sooner


def _health_check_interval(value: float) -> float:
    if 0 < value < MIN_HEALTH_CHECK_S:
        raise PydanticCustomError(
            "health_check_s",
            f"0 turns active health checks off; otherwise at least {MIN_HEALTH_CHECK_S:g} s",
        )
    return value


HealthCheckSeconds = Annotated[
    float,
    Field(ge=0, le=3600),
    AfterValidator(_health_check_interval),
    Documented(lambda: {"not": {"exclusiveMinimum": 0, "exclusiveMaximum": MIN_HEALTH_CHECK_S}}),
]
