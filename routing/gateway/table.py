"""The routing table: configuration compiled into immutable in-memory values.

Calls never touch the database. ``compile_table()`` reads providers, groups, targets,
global settings and client keys once, resolves every group's effective policy through the
configuration layers, and returns a frozen ``RoutingTable``. The runtime swaps in a new
table whenever configuration changes (``routing.gateway.runtime``), in every process.

Groups compile independently: a group whose algorithm no longer imports (its module
vanished after the write that checked it) lands in ``RoutingTable.broken`` with the reason,
and ``/v1`` answers an OpenAI-shaped 503 naming it while every other group keeps serving.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from routing.conf import switchyard_settings
from routing.config.aliases import first_match
from routing.config.policy import engine_values
from routing.continuity.effort import EffortPolicy
from routing.continuity.provenance import Producer
from routing.continuity.rewrite import TargetContinuity
from routing.continuity.window import DeclaredWindow, declared_window
from routing.engine.addresses import metadata_host
from routing.engine.algorithms import Candidate, RoutingAlgorithm, get_algorithm
from routing.engine.failures import FailureCode
from routing.engine.health import CircuitPolicy
from routing.engine.plan import CommitPoint
from routing.engine.rescue import Resume
from routing.engine.retry import RetryPolicy
from routing.engine.targets import split_target_key, target_key
from routing.limits.catalogue import catalogue_price
from routing.limits.spec import GroupLimits, LimitSet, Price
from routing.protocols import Protocol
from routing.protocols.registry import (
    DIRECT,
    KIND_PROTOCOLS,
    PLATFORMS,
    PROTOCOLS,
    PlatformSettings,
    PlatformSpec,
    ProtocolSpec,
)
from routing.upstream.openai import Timeouts

if TYPE_CHECKING:
    from routing.models import Provider

log = logging.getLogger("switchyard.table")


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    name: str
    kind: str
    base_url: str
    api_key: str = field(repr=False)
    headers: Mapping[str, str]
    timeouts: Timeouts
    version: int
    models: frozenset[str] = frozenset()  # what a direct provider/model address may name
    check_interval_s: float = 10.0  # active health checks of its cooling targets; 0 = off
    # Why no request could carry this provider's credential or headers (a value stored
    # before validation said so, or a credential the secret key cannot decrypt): its
    # targets fail at dispatch instead of crashing a call or the whole table.
    config_error: str = ""
    # anthropic-beta filter (routing.protocols.betas): None = every beta may pass
    betas_allow: frozenset[str] | None = None
    betas_strip: frozenset[str] = frozenset()
    platform: PlatformSpec = DIRECT  # where and how it is reached (SPEC §19)
    settings: PlatformSettings = PlatformSettings()  # the platform's fields
    # Its kind's protocol, looked up in the registry once, here (an unknown kind, stored
    # before validation said so, fails its targets at dispatch like a bad credential).
    protocol: ProtocolSpec = field(init=False)

    def __post_init__(self) -> None:
        protocol = KIND_PROTOCOLS.get(self.kind)
        if protocol is None:
            protocol = PROTOCOLS[Protocol.CHAT]
            if not self.config_error:
                object.__setattr__(self, "config_error", f"unknown kind '{self.kind}'")
        object.__setattr__(self, "protocol", protocol)

    @property
    def secrets(self) -> tuple[str, ...]:
        """What upstream text is scrubbed of (SPEC §9): the credential and every header
        value (they often carry credentials too)."""
        return (self.api_key, *self.headers.values(), *self.settings.secrets)

    @property
    def fingerprint(self) -> tuple[object, ...]:
        """Everything a pooled client depends on: a change means a new client."""
        return (
            self.kind,
            self.platform.name,
            self.settings,
            self.base_url,
            self.api_key,
            tuple(sorted(self.headers.items())),
            self.timeouts,
        )


@dataclass(frozen=True, slots=True)
class TargetSpec:
    candidate: Candidate
    provider: ProviderSpec
    model: str
    context_window: int | None
    # Conversation continuity (SPEC §13) and per-target policy:
    keep_thinking: bool = False
    break_tool_loop: bool = False
    reasoning_effort: EffortPolicy = EffortPolicy.INHERIT
    efforts: tuple[str, ...] = ()
    circuit: CircuitPolicy | None = None  # None: the group's
    prefill: bool | None = None  # takes an assistant prefill (capabilities.prefill, §16)
    price: Price | None = None  # per million tokens (SPEC §17); None: cost unknown
    continuity: TargetContinuity = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "continuity",
            TargetContinuity(
                Producer(self.provider.name, self.model), self.keep_thinking, self.break_tool_loop
            ),
        )

    @property
    def key(self) -> str:
        return self.candidate.key


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    targets: tuple[TargetSpec, ...]
    algorithm: RoutingAlgorithm
    retry: RetryPolicy
    switch_codes: frozenset[FailureCode]
    circuit: CircuitPolicy
    commit: CommitPoint
    context_window: int | None
    deadline_s: float
    version: int
    policy: Mapping[str, object]  # the effective flat policy, for status pages
    resume: Resume = Resume.OFF
    # Derived once at compile time so a call's selection does not rebuild them:
    keys: tuple[str, ...] = field(init=False)  # target keys in configured order
    provider_names: tuple[str, ...] = field(init=False)  # providers used, for health reads
    by_key: Mapping[str, TargetSpec] = field(init=False)
    window: DeclaredWindow = field(init=False)  # what /v1/models declares (SPEC §13)
    kinds: frozenset[str] = field(init=False)  # upstream kinds of its targets (front doors)
    protocols: tuple[Protocol, ...] = field(init=False)  # the same, in target order, once
    members: tuple[tuple[str, str], ...] = field(init=False)  # (target key, provider name)
    limits: GroupLimits | None = field(init=False)  # None: nothing limits it (SPEC §17)

    def __post_init__(self) -> None:
        compact = self.policy.get("compact_window")
        object.__setattr__(
            self,
            "window",
            declared_window(
                self.context_window,
                int(compact) if isinstance(compact, int) else None,
                (t.context_window for t in self.targets),
            ),
        )
        object.__setattr__(self, "keys", tuple(t.key for t in self.targets))
        object.__setattr__(
            self, "provider_names", tuple(dict.fromkeys(t.provider.name for t in self.targets))
        )
        object.__setattr__(self, "by_key", {t.key: t for t in self.targets})
        object.__setattr__(self, "kinds", frozenset(t.provider.kind for t in self.targets))
        protocols = dict.fromkeys(t.provider.protocol.kind for t in self.targets)
        object.__setattr__(self, "protocols", tuple(protocols))
        object.__setattr__(self, "members", tuple((t.key, t.provider.name) for t in self.targets))
        object.__setattr__(self, "limits", GroupLimits.of_policy(self.policy))


def group_summary(group: GroupSpec) -> str:
    """One line for the start-up log (seed 003 §8): the chain and the policy it runs."""
    retry = group.retry
    retries = (
        f"{retry.max_retries} retries per target on {' '.join(sorted(c.value for c in retry.retry_codes))}, "
        f"backoff {retry.initial_delay_ms}→{retry.max_delay_ms} ms jitter {retry.jitter_ratio:g}, "
        f"switch after {retry.switch_after_ms} ms"
        if retry.max_retries
        else "no in-place retries"
    )
    chain = " → ".join(t.key for t in group.targets) or "(no enabled target)"
    return (
        f"group {group.name}: {chain}; {group.policy.get('algorithm', 'priority')}; {retries}; "
        f"{len(group.switch_codes)} switch codes; commit {group.commit}; "
        f"declared window {group.window.tokens} ({group.window.source})"
    )


@dataclass(frozen=True, slots=True)
class KeySpec:
    kind: str  # "client" | "admin"
    groups: frozenset[str]  # empty = every group
    name: str = ""
    id: int | None = None  # the ApiKey row, so calls can record who made them
    limits: LimitSet | None = None  # None: nothing limits it (SPEC §17)


@dataclass(frozen=True, slots=True)
class RoutingTable:
    groups: Mapping[str, GroupSpec]
    providers: Mapping[str, ProviderSpec]
    keys: Mapping[str, KeySpec]  # sha256 hex of the secret -> key facts
    broken: Mapping[str, str] = field(default_factory=dict)  # group name -> why it cannot serve
    config_version: int = (
        0  # ConfigVersion read before compiling (routing.gateway.sync compares it)
    )
    base_policy: Mapping[str, object] = field(
        default_factory=dict
    )  # defaults + file + global layers
    # (pattern, group name) in group order: model-name aliases (routing.config.aliases)
    aliases: tuple[tuple[str, str], ...] = ()
    _direct: dict[str, GroupSpec] = field(default_factory=dict, compare=False, repr=False)
    _aliased: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def resolve(self, model: str) -> GroupSpec | None:
        """A group by name, else a direct ``provider/model`` address, else the group one
        of whose aliases matches, else None."""
        group = self.groups.get(model)
        if group is not None:
            return group
        group = self.direct_target(model)
        if group is not None or not self.aliases:
            return group
        name = self.alias_of(model)
        return self.groups.get(name) if name is not None else None

    def alias_of(self, model: str) -> str | None:
        """The name of the group whose alias matches ``model`` (memoised, bounded)."""
        if model in self._aliased:
            return self._aliased[model]
        name = first_match(model, self.aliases)
        if len(self._aliased) < 10_000:  # bounded: model names come from clients
            self._aliased[model] = name
        return name

    def direct_target(self, address: str) -> GroupSpec | None:
        """``provider/model`` addresses bypass groups but still go through health."""
        cached = self._direct.get(address)
        if cached is not None:
            return cached
        parts = split_target_key(address)
        provider = self.providers.get(parts.provider) if parts is not None else None
        # Only models the provider lists: clients must not mint health entries and metric
        # labels at will by inventing addresses.
        if parts is None or provider is None or parts.model not in provider.models:
            return None
        model = parts.model
        candidate = Candidate(
            key=target_key(provider.name, model), provider=provider.name, model=model, position=0
        )
        group = _build_group(
            name=address,
            targets=(TargetSpec(candidate, provider, model, None),),
            policy=self.base_policy,
            version=0,
        )
        if len(self._direct) < 10_000:  # bounded: addresses come from clients
            self._direct[address] = group
        return group


def keep_algorithms(previous: RoutingTable | None, table: RoutingTable) -> RoutingTable:
    """``table`` with each group's algorithm instance carried over from ``previous`` when
    the change did not touch that group: same group version, same algorithm class, same
    candidates. A third-party algorithm may keep state in its hooks (learned weights, a
    cursor of its own); rebuilding every group on any change would wipe it (SPEC §16)."""
    if previous is None:
        return table
    carried = False
    groups = dict(table.groups)
    for name, group in table.groups.items():
        old = previous.groups.get(name)
        if (
            old is not None
            and old.algorithm is not group.algorithm
            and old.version == group.version
            and type(old.algorithm) is type(group.algorithm)
            and [t.candidate for t in old.targets] == [t.candidate for t in group.targets]
        ):
            groups[name] = dataclasses.replace(group, algorithm=old.algorithm)
            carried = True
    return dataclasses.replace(table, groups=groups) if carried else table


# A layer that declares one of these clears the other below it (SPEC §13: exclusive).
_EXCLUSIVE = {"context_window": "compact_window", "compact_window": "context_window"}


def _layered(*layers: Mapping[str, object]) -> dict[str, object]:
    effective: dict[str, object] = {}
    for layer in layers:
        effective.update(layer)
        for name, other in _EXCLUSIVE.items():
            if layer.get(name) is not None and other not in layer:
                effective[other] = None
    return effective


def _build_group(
    *,
    name: str,
    targets: tuple[TargetSpec, ...],
    policy: Mapping[str, Any],
    version: int,
    circuits: Mapping[str, Any] | None = None,
) -> GroupSpec:
    algorithm_class = get_algorithm(str(policy["algorithm"]), switchyard_settings().ALGORITHMS)
    circuit = CircuitPolicy(**engine_values(policy, "circuit"))
    if circuits:
        targets = tuple(_with_circuit(t, circuits.get(t.key), circuit) for t in targets)
    return GroupSpec(
        name=name,
        targets=targets,
        algorithm=algorithm_class([t.candidate for t in targets]),
        retry=RetryPolicy(**engine_values(policy, "retry")),
        switch_codes=frozenset(FailureCode(c) for c in policy["switch_codes"]),
        circuit=circuit,
        commit=CommitPoint(policy["commit"]),
        context_window=policy.get("context_window"),
        deadline_s=float(policy["deadline_s"]),
        version=version,
        policy=dict(policy),
        resume=Resume(policy.get("resume", "off")),
    )


def target_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A target's stored options (``Target.options``, validated on write) as spec fields."""
    out: dict[str, Any] = {}
    for name in ("keep_thinking", "break_tool_loop"):
        if name in options:
            out[name] = bool(options[name])
    if "reasoning_effort" in options:
        out["reasoning_effort"] = EffortPolicy(options["reasoning_effort"])
    if options.get("efforts"):
        out["efforts"] = tuple(options["efforts"])
    capabilities = options.get("capabilities")
    if isinstance(capabilities, Mapping) and capabilities.get("prefill") is not None:
        out["prefill"] = bool(capabilities["prefill"])
    return out


def target_price(options: Mapping[str, Any], provider: ProviderSpec, model: str) -> Price | None:
    """A target's price: its configured ``price`` wins; without one, the genai-prices
    catalogue's for the model where the provider reaches it (SPEC §19) — looked up when
    the table compiles (and by the pages), never on a call; unknown there: None
    (unpriced, never guessed)."""
    configured = Price.of(options.get("price"))
    if configured is not None:
        return configured
    return catalogue_price(
        kind=provider.kind,
        platform=provider.platform.name,
        model=model,
        base_url=provider.base_url,
    )


def _with_circuit(target: TargetSpec, overrides: Any, group: CircuitPolicy) -> TargetSpec:
    """Per-target circuit overrides (SPEC §4) on top of the group's circuit policy."""
    if not isinstance(overrides, Mapping) or not overrides:
        return target
    flat = {f"circuit.{name}": value for name, value in overrides.items()}
    merged = dataclasses.replace(group, **engine_values(flat, "circuit"))
    return dataclasses.replace(target, circuit=merged)


def unsendable(api_key: str, headers: Mapping[str, str], base_url: str = "") -> str:
    """Why a credential or header value could not go on an HTTP request, or the request
    must not go to ``base_url`` (a cloud metadata service, stored before the schema
    refused it), or ""."""
    from routing.config.schema import printable_ascii

    if base_url and metadata_host(urlsplit(base_url).hostname or ""):
        return "the provider's base_url is a cloud metadata service"
    if api_key and not printable_ascii(api_key):
        return "the provider's credential is not printable ASCII"
    for name, value in headers.items():
        if not printable_ascii(str(value)):
            return f"the provider's header {name} is not printable ASCII"
    return ""


def _credential(row: Provider) -> tuple[str, dict[str, str], str]:
    """A provider's plaintext credential and header values, or ``("", {}, why)`` when they
    cannot be decrypted (the secret key changed without ``rotate_secret``): that provider's
    configuration failure, not the whole table's (``routing.E007`` reports it at ``check
    --database``)."""
    from routing.crypto import CredentialDecryptError

    try:
        return row.get_api_key(), row.get_headers(), ""
    except CredentialDecryptError as exc:
        log.error("provider %s cannot be used: %s", row.name, exc)
        return "", {}, str(exc)


def _platform(row: Provider, api_key: str) -> tuple[PlatformSpec, PlatformSettings, str]:
    """A provider's platform and its fields, or why its targets cannot be reached (an
    unknown platform or a missing field stored before validation said so, a secret the
    secret key cannot decrypt): that provider's failure at dispatch, not the table's."""
    from routing.crypto import CredentialDecryptError

    platform = PLATFORMS.get(row.platform)
    if platform is None:
        return DIRECT, PlatformSettings(), f"unknown platform '{row.platform}'"
    try:
        settings = row.platform_settings()
    except CredentialDecryptError as exc:
        log.error("provider %s cannot be used: %s", row.name, exc)
        return platform, PlatformSettings(), str(exc)
    problems = platform.check(row.kind, row.base_url, api_key, settings)
    return platform, settings, "; ".join(problems.values())


def _endpoint(row: Provider, platform: PlatformSpec, settings: PlatformSettings) -> str:
    """The base a provider is reached at: its ``base_url``, else the platform's own
    endpoint (SPEC §19), as the platform resolves them."""
    protocol = KIND_PROTOCOLS.get(row.kind)
    if protocol is None:
        return row.base_url
    return platform.resolve_base_url(protocol, row.base_url, settings)


def compile_table() -> RoutingTable:
    """Read the whole configuration (sync ORM) and compile it. Runs off the request path."""
    from routing.config.policy import BUILTIN_DEFAULTS
    from routing.models import ApiKey, ConfigVersion, GlobalSettings

    # Read first: a write committing mid-compile then shows as a newer version, so the
    # version watcher recompiles once more rather than keeping a half-old table.
    config_version = ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    global_settings = (
        GlobalSettings.objects.filter(pk=1).first() or GlobalSettings()
    )  # read-only: never create here
    base_policy = _layered(
        BUILTIN_DEFAULTS, global_settings.file_policy or {}, global_settings.policy or {}
    )
    providers = _compile_providers()
    groups, broken, aliases = _compile_groups(providers, base_policy)
    keys = {
        row.hashed: KeySpec(
            kind=row.kind,
            groups=frozenset(row.groups or ()),
            name=row.name,
            id=row.pk,
            limits=LimitSet.of(row.limits or {}),
        )
        for row in ApiKey.objects.filter(revoked_at__isnull=True)
    }
    return RoutingTable(
        groups=groups,
        providers=providers,
        keys=keys,
        broken=broken,
        base_policy=base_policy,
        config_version=int(config_version or 0),
        aliases=tuple(aliases),
    )


def _compile_providers() -> dict[str, ProviderSpec]:
    from routing.models import Provider

    default_check_s = switchyard_settings().HEALTH_CHECK_S
    return {row.name: _provider_spec(row, default_check_s) for row in Provider.objects.all()}


def _provider_spec(row: Provider, default_check_s: float) -> ProviderSpec:
    api_key, headers, unreadable = _credential(row)
    platform, settings, unreachable = _platform(row, api_key)
    return ProviderSpec(
        name=row.name,
        kind=row.kind,
        platform=platform,
        settings=settings,
        base_url=_endpoint(row, platform, settings),
        api_key=api_key,
        headers=headers,
        models=frozenset(row.models or ()),
        check_interval_s=(
            default_check_s if row.health_check_s is None else float(row.health_check_s)
        ),
        config_error=unreadable or unreachable or unsendable(api_key, headers, row.base_url),
        betas_allow=(
            frozenset(row.betas["allow"])
            if isinstance(row.betas, dict) and row.betas.get("allow") is not None
            else None
        ),
        betas_strip=frozenset((row.betas or {}).get("strip") or ()),
        timeouts=Timeouts(
            connect_s=row.connect_timeout_s,
            headers_s=row.headers_timeout_s,
            first_token_s=row.first_token_timeout_s,
            idle_s=row.idle_timeout_s,
            total_s=row.total_timeout_s,
        ),
        version=row.version,
    )


def _compile_groups(
    providers: Mapping[str, ProviderSpec], base_policy: Mapping[str, object]
) -> tuple[dict[str, GroupSpec], dict[str, str], list[tuple[str, str]]]:
    """Every group's spec (a group that cannot compile lands in ``broken`` with why, the
    others still serve), and the aliases in the order they were read."""
    from routing.models import Group

    groups: dict[str, GroupSpec] = {}
    broken: dict[str, str] = {}
    aliases: list[tuple[str, str]] = []
    for group in Group.objects.prefetch_related("targets__provider").all():
        aliases += [(pattern, group.name) for pattern in group.aliases or ()]
        enabled = [t for t in group.targets.all() if t.enabled]
        targets = tuple(
            TargetSpec(
                candidate=Candidate(
                    key=target_key(t.provider.name, t.model),
                    provider=t.provider.name,
                    model=t.model,
                    position=index,
                    weight=t.weight,
                ),
                provider=providers[t.provider.name],
                model=t.model,
                context_window=t.context_window,
                price=target_price(t.options or {}, providers[t.provider.name], t.model),
                **target_options(t.options or {}),
            )
            for index, t in enumerate(enabled)
        )
        try:
            groups[group.name] = _build_group(
                name=group.name,
                targets=targets,
                policy=_layered(base_policy, group.policy or {}),
                version=group.version,
                circuits={
                    target_key(t.provider.name, t.model): (t.options or {}).get("circuit")
                    for t in enabled
                },
            )
        except Exception as exc:  # one bad group must not take the others down
            broken[group.name] = str(exc) or type(exc).__name__
            log.error("group %s cannot be served: %s", group.name, broken[group.name])
    return groups, broken, aliases
