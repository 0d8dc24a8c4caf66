"""The one configuration schema (pydantic v2) behind every write path.

The config file, the management API, the settings page and the admin all validate
through these models, so a value rejected on one path is rejected on all of them.

Rules that hold everywhere:

- ``extra="forbid"`` and ``strict=True``: unknown keys are errors, and ``"5"`` is not an
  integer nor ``1`` a boolean. Old or renamed keys (:data:`RENAMED_KEYS`) get a message
  saying what to write instead.
- Policy fields are optional (absent = inherit the lower layer). An explicit ``null`` is
  rejected except for ``context_window``, where it means "no declared window".
- Failure-code lists must be non-empty, without repeats, of known codes.
- Cross-field rules (``initial_delay_ms <= max_delay_ms``, ``cooldown_base_ms <=
  cooldown_cap_ms``) are checked within one block here, and on the *effective*
  (layered) values by ``routing.config.policy.validate_effective``.
- Cross-references (unique names, duplicate targets, targets naming an unknown
  provider) are checked by :func:`cross_check` on the raw document too, so a file with
  both field errors and reference errors reports all of them at once.

Errors come out as :class:`~routing.config.errors.FieldError` with dotted paths via
:func:`field_errors`; inputs are never echoed (``hide_input_in_errors``), so a credential
in a malformed document cannot leak into a message.

The package, in import order (each module imports only those above it)::

    base.py        strict bases, the policy-field rules, RENAMED_KEYS, the multi-error
    types.py       field types: names, URLs, model ids, failure codes, algorithms
    policies.py    the policy fields (each declared once) and PolicyIn
    targets.py     TargetIn and the options stored in Target.options
    providers.py   ProviderIn, its timeouts, betas, headers and credential rules
    references.py  cross-references on the raw document
    groups.py      GroupIn, aliases, ConfigFileIn (the whole file)
    messages.py    pydantic errors -> FieldErrors with dotted paths
    parse.py       the entry points (parse_config, parse_provider, ...)

Import from ``routing.config.schema``; the modules are its layout, not its interface.
"""

from __future__ import annotations

from routing.config.schema.base import RENAMED_KEYS, renamed_message
from routing.config.schema.groups import ALIAS_PATTERN, Aliases, ConfigFileIn, GroupIn
from routing.config.schema.messages import field_errors, join_path
from routing.config.schema.parse import parse_config, parse_group, parse_provider, parse_target
from routing.config.schema.policies import (
    LIMIT_NAMES,
    POLICY_KEYS,
    CircuitPolicyIn,
    LimitsIn,
    PolicyIn,
    RetryPolicyIn,
    SessionLimitsIn,
    policy_models,
)
from routing.config.schema.providers import (
    BETA_NAME_PATTERN,
    PLATFORM_FIELDS,
    PLATFORM_SECRETS,
    TIMEOUT_DEFAULTS,
    BetaNames,
    BetasIn,
    ProviderIn,
    TimeoutsIn,
)
from routing.config.schema.references import cross_check, duplicate_targets, unknown_providers
from routing.config.schema.targets import (
    TARGET_OPTIONS,
    CapabilitiesIn,
    Effort,
    PriceIn,
    TargetCircuitIn,
    TargetIn,
    target_options,
)
from routing.config.schema.types import (
    GROUP_NAME_RE,
    MAX_CONTEXT_WINDOW,
    MIN_HEALTH_CHECK_S,
    MODEL_ID_PATTERN,
    PRINTABLE_ASCII_PATTERN,
    PROVIDER_NAME_RE,
    URL_PATTERN,
    AlgorithmName,
    BaseUrl,
    CodeList,
    ContextWindow,
    Documented,
    FailureCodeIn,
    GroupName,
    HealthCheckSeconds,
    ModelId,
    ProviderName,
    TimeoutSeconds,
    extra_algorithms,
    printable_ascii,
)

__all__ = [
    "ALIAS_PATTERN",
    "AlgorithmName",
    "Aliases",
    "BETA_NAME_PATTERN",
    "BaseUrl",
    "BetaNames",
    "BetasIn",
    "CapabilitiesIn",
    "CircuitPolicyIn",
    "CodeList",
    "ConfigFileIn",
    "ContextWindow",
    "Documented",
    "Effort",
    "FailureCodeIn",
    "GROUP_NAME_RE",
    "GroupIn",
    "GroupName",
    "HealthCheckSeconds",
    "LIMIT_NAMES",
    "LimitsIn",
    "MAX_CONTEXT_WINDOW",
    "MIN_HEALTH_CHECK_S",
    "ModelId",
    "MODEL_ID_PATTERN",
    "PLATFORM_FIELDS",
    "PLATFORM_SECRETS",
    "POLICY_KEYS",
    "PRINTABLE_ASCII_PATTERN",
    "PROVIDER_NAME_RE",
    "PolicyIn",
    "PriceIn",
    "ProviderIn",
    "ProviderName",
    "RENAMED_KEYS",
    "RetryPolicyIn",
    "SessionLimitsIn",
    "TARGET_OPTIONS",
    "TIMEOUT_DEFAULTS",
    "TargetCircuitIn",
    "TargetIn",
    "TimeoutSeconds",
    "TimeoutsIn",
    "URL_PATTERN",
    "cross_check",
    "duplicate_targets",
    "extra_algorithms",
    "field_errors",
    "join_path",
    "parse_config",
    "parse_group",
    "parse_provider",
    "parse_target",
    "policy_models",
    "printable_ascii",
    "renamed_message",
    "target_options",
    "unknown_providers",
]
