"""Switchyard's pure routing engine: facts in, decisions and events out.

No Django, no httpx, no sleeping, no wall clock — time arrives as ``now`` (epoch
seconds) and randomness as ``rand() -> [0, 1)``, so every rule is tested with Django
unconfigured and without waiting. The async gateway (``routing.upstream``, the state
stores, the API) carries the decisions out.

::

    routing/engine/
    ├── failures.py    FailureCode taxonomy, default retry/switch/credential code sets,
    │                  classify_http / classify_error_object, Retry-After, scrub
    ├── retry.py       RetryPolicy and backoff_ms (exponential, capped, jittered)
    ├── plan.py        decide(): one failed attempt -> RETRY(delay) | SWITCH(reason) | SURFACE;
    │                  CommitPoint, SwitchReason; context_window_allows()
    ├── health.py      per-target health state machine (healthy/cooling/probing) and
    │                  per-provider credential state; transitions return HealthEvents
    ├── select.py      judge() -> Verdict, choose() -> the candidates a call walks,
    │                  charge() -> what a failure costs: the one place eligibility is decided
    ├── algorithms.py  Candidate, SelectionView, RoutingAlgorithm and the five built-ins,
    │                  get_algorithm() by name or dotted path
    └── targets.py     target keys (``provider/model``): target_key, provider_of,
                       split_target_key, the one place that builds and splits them

Dependencies point one way: failures <- retry <- plan; failures, targets <- health;
failures <- algorithms; health, plan <- select.
"""

from .algorithms import (
    ALGORITHMS,
    Candidate,
    Latency,
    LeastBusy,
    Priority,
    RoundRobin,
    RoutingAlgorithm,
    SelectionView,
    UnknownAlgorithm,
    Weighted,
    get_algorithm,
    smooth_weighted_sequence,
)
from .failures import (
    CREDENTIAL_CODES,
    DEFAULT_RETRY_CODES,
    DEFAULT_SWITCH_CODES,
    PROVIDER_WIDE_CODES,
    Failure,
    FailureCode,
    classify_error_object,
    classify_http,
    parse_retry_after,
    scrub,
)
from .health import (
    Availability,
    CircuitPolicy,
    EventKind,
    HealthEvent,
    HealthState,
    HealthTransitionError,
    ProviderHealth,
    TargetHealth,
    availability,
    begin_probe,
    cooling_duration_s,
    disable_provider,
    enable_provider,
    force_revive,
    record_failure,
    record_success,
    release_probe,
    reset,
)
from .plan import Action, CommitPoint, Decision, SwitchReason, context_window_allows, decide
from .retry import RetryPolicy, backoff_ms
from .targets import TargetKeyParts, provider_of, split_target_key, target_key

__all__ = [
    "ALGORITHMS",
    "CREDENTIAL_CODES",
    "PROVIDER_WIDE_CODES",
    "DEFAULT_RETRY_CODES",
    "DEFAULT_SWITCH_CODES",
    "Action",
    "Availability",
    "Candidate",
    "CircuitPolicy",
    "CommitPoint",
    "Decision",
    "EventKind",
    "Failure",
    "FailureCode",
    "HealthEvent",
    "HealthState",
    "HealthTransitionError",
    "Latency",
    "LeastBusy",
    "Priority",
    "ProviderHealth",
    "RetryPolicy",
    "RoundRobin",
    "RoutingAlgorithm",
    "SelectionView",
    "SwitchReason",
    "TargetKeyParts",
    "TargetHealth",
    "UnknownAlgorithm",
    "Weighted",
    "availability",
    "backoff_ms",
    "begin_probe",
    "release_probe",
    "classify_error_object",
    "classify_http",
    "context_window_allows",
    "cooling_duration_s",
    "decide",
    "disable_provider",
    "enable_provider",
    "force_revive",
    "get_algorithm",
    "parse_retry_after",
    "provider_of",
    "record_failure",
    "record_success",
    "reset",
    "scrub",
    "smooth_weighted_sequence",
    "split_target_key",
    "target_key",
]
