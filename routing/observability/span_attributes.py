"""What a call's spans say (SPEC §18, docs/tracing.md): the attributes of the call's span,
of each attempt's and of a refused request's, and their error statuses. Imported only when
tracing is on (by ``routing.observability.spans``, which builds the spans from these).

What becomes an attribute is chosen here and nowhere else: names, models, codes, counts
and times, all of types OTLP carries as they are. Never a credential, a prompt, a
completion, a tool argument or an upstream's error text (which may quote the prompt).
Attributes that repeat from call to call are built once and kept (``FixedAttributes``,
whose bytes the encoder writes once too); only what is not the usual is added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.trace import Status, StatusCode

from routing.observability.otlp_wire import FixedAttributes
from routing.protocols.registry import VENDORS

if TYPE_CHECKING:
    from routing.gateway.events import AttemptRecord, CallRecord
    from routing.gateway.table import TargetSpec

# gen_ai.provider.name by upstream kind (the GenAI conventions' well-known values)
PROVIDER_NAMES = VENDORS  # routing.protocols.registry
MODEL_MAX = 256  # a client's model string, capped (in the span name and its attribute)


def call_fixed(
    operation: str,
    requested_model: str,
    door: str,
    group: str,
    key_name: str,
    commit: str,
    stream: bool,
) -> tuple[FixedAttributes, str]:
    """A call's attributes that repeat from call to call (``Tracing.start_call`` keeps
    them per value), and its span's name."""
    fixed = FixedAttributes(
        {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": requested_model[:MODEL_MAX],
            "switchyard.door": door,
            "switchyard.group": group,
            "switchyard.key.name": key_name,
            "switchyard.commit_point": commit,
            **({"switchyard.stream": True} if stream else {}),
        }
    )
    return fixed, f"{operation} {fixed['gen_ai.request.model']}"


def refused_attributes(record: CallRecord, operation: str, code: str) -> dict[str, Any]:
    """The one span's attributes of a request refused before it was a call: its reason
    is the refusal's ``code``, never its message (which may quote the request)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "switchyard.door": record.door,
        "switchyard.request_id": record.call_id,
        "switchyard.outcome": record.outcome.value,
        "error.type": code,
        "http.response.status_code": record.http_status,
    }
    if record.key_name:
        attributes["switchyard.key.name"] = record.key_name
    if record.group:
        attributes["switchyard.group"] = record.group
    return attributes


_errors: dict[str, Status] = {}


def error_status(code: str) -> Status:
    """An error status described by ``code`` (a failure or error code: a few dozen)."""
    status = _errors.get(code)
    if status is None:
        if len(_errors) >= 1024:
            _errors.clear()
        status = _errors[code] = Status(StatusCode.ERROR, code)
    return status


def attempt_outcome(target: TargetSpec, result: AttemptRecord) -> dict[str, Any]:
    """What an attempt's span says of how it went, beyond its time to first token: only
    what is not the usual (each attribute costs encoding time)."""
    attributes: dict[str, Any] = {}
    if result.try_number > 1:
        attributes["switchyard.try"] = result.try_number
    if result.probe:
        attributes["switchyard.probe"] = True
    if result.rewrites:
        attributes["switchyard.rewrites"] = list(result.rewrites)
    if result.ok:
        attributes["gen_ai.response.model"] = target.model
        return attributes
    attributes["error.type"] = result.code or "UNKNOWN"  # the failure code (SPEC §2)
    if result.status is not None:
        attributes["http.response.status_code"] = result.status
    if result.will_retry:
        attributes["switchyard.retry"] = True
    if result.switched:
        if result.reason:
            attributes["switchyard.switch.reason"] = str(result.reason)
        if result.switched_to:
            attributes["switchyard.switched_to"] = result.switched_to
    return attributes


_targets: dict[tuple[str, str, str, str], tuple[FixedAttributes, str]] = {}


def target_attributes(operation: str, target: TargetSpec) -> tuple[FixedAttributes, str]:
    """The attributes an attempt on ``target`` always has, and its span's name (computed
    once per target)."""
    provider = target.provider
    key = (operation, target.key, provider.kind, provider.base_url)
    found = _targets.get(key)
    if found is not None:
        return found
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER_NAMES.get(provider.kind, provider.kind),
        "gen_ai.request.model": target.model,
        "switchyard.target": target.key,
        "switchyard.provider.kind": provider.kind,
    }
    address = urlsplit(provider.base_url)
    if address.hostname:  # never the URL itself: it may carry a user or a query key
        attributes["server.address"] = address.hostname
        port = _port(address.port, address.scheme)
        if port:
            attributes["server.port"] = port
    if len(_targets) >= 4096:  # clients may address provider/<any model>: stay bounded
        _targets.clear()
    found = _targets[key] = (FixedAttributes(attributes), f"{operation} {target.model}")
    return found


def call_attributes(
    fixed: FixedAttributes, request_id: str, record: CallRecord, answered: TargetSpec | None
) -> tuple[FixedAttributes, dict[str, Any]]:
    """The call's span's attributes: ``fixed`` (door, group, key…) joined with how the
    call went (which repeats from call to call), then what is the call's own.
    ``answered``: the target whose attempt answered, if one did."""
    outcome = fixed.joined(
        (
            record.outcome, len(record.attempts), record.http_status, record.served_by,
            record.served_by_fallback, record.error_code,
            None if answered is None else (answered.model, answered.provider.kind),
        ),
        lambda: _call_outcome(record, answered),
    )  # fmt: skip
    own: dict[str, Any] = {"switchyard.request_id": request_id}
    if record.ttft_ms is not None:
        own["switchyard.ttft_ms"] = round(record.ttft_ms, 3)
    if record.usage:
        own.update(usage_counts(record.usage))
    if record.cost is not None:
        own["switchyard.cost"] = float(record.cost)
    return outcome, own


def _call_outcome(record: CallRecord, answered: TargetSpec | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "switchyard.outcome": record.outcome.value,
        "switchyard.attempts": len(record.attempts),
        "http.response.status_code": record.http_status,
    }
    if record.served_by:
        attributes["switchyard.served_by"] = record.served_by
        if record.served_by_fallback:
            attributes["switchyard.served_by_fallback"] = True
    if answered is not None:
        attributes["gen_ai.response.model"] = answered.model
        kind = answered.provider.kind
        attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(kind, kind)
    if record.error_code:
        attributes["error.type"] = record.error_code
    return attributes


def usage_counts(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """The GenAI token counts of a usage object (chat's names or the Messages and
    Responses ones)."""
    if not usage:
        return {}
    out: dict[str, int] = {}
    get = usage.get
    for name, chat, other in _USAGE_KEYS:
        value = get(chat)
        if type(value) is not int or not 0 <= value < INT64:  # a bool is not a count
            value = get(other)
            if type(value) is not int or not 0 <= value < INT64:
                continue
        out[name] = value
    return out


INT64 = 1 << 63  # an OTLP int attribute is an int64: a count beyond it is not sent
# Each GenAI count, chat's key for it, then the Messages and Responses one
_USAGE_KEYS = (
    ("gen_ai.usage.input_tokens", "prompt_tokens", "input_tokens"),
    ("gen_ai.usage.output_tokens", "completion_tokens", "output_tokens"),
)


def _port(port: int | None, scheme: str) -> int | None:
    return port or {"http": 80, "https": 443}.get(scheme)
