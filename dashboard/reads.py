"""What the groups page shows, assembled from four reads: the configuration
(``routing.selectors``, sync ORM), health (one state-store snapshot for every target on
the page), live statistics (``dashboard.stats``: in-memory windows, no query) and recent
calls (the audit tables, async ORM).

A failed read of recent calls does not hide the groups: the card says why the calls are
missing (SPEC §7: a failed load says why).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from dashboard import stats as live_stats
from dashboard.chain import CallView, call_from_row
from dashboard.feedback import Feedback, outcome
from dashboard.health import Badge, badges_read
from routing import selectors
from routing.audit.retention import retention_from_settings
from routing.audit.selectors import calls_count, calls_recent
from routing.engine.targets import target_key
from routing.gateway.runtime import TableUnavailable, get_runtime
from routing.gateway.table import ProviderSpec, target_price
from routing.limits.spec import Price, PriceSource

log = logging.getLogger("switchyard.dashboard")

CALLS_PER_GROUP = 10


@dataclass(frozen=True, slots=True)
class TargetRow:
    id: int
    provider: str
    model: str
    weight: int
    enabled: bool
    context_window: int | None
    badge: Badge
    up_order: str  # the whole order after moving this target up ("" = cannot)
    down_order: str
    stats: live_stats.TargetStats | None = None
    price: Price | None = None  # configured, or the catalogue's (SPEC §19); None: unpriced

    @property
    def key(self) -> str:
        return target_key(self.provider, self.model)

    @property
    def price_text(self) -> str:
        """``3 in / 15 out per M tokens · genai-prices 0.2.3: anthropic/claude-sonnet-4-5``."""
        price = self.price
        if price is None:
            return "unpriced: no price configured and none in the catalogue (cost –)"
        numbers = f"{price.input:g} in / {price.output:g} out per M tokens"
        if price.source is PriceSource.CATALOGUE:
            return f"{numbers} · {price.origin}"
        return f"{numbers} · configured"


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    name: str
    models: tuple[str, ...]


@dataclass(slots=True)
class LimitRow:
    name: str
    limit: float
    used: float
    window: str

    @property
    def reached(self) -> bool:
        return self.used >= self.limit


@dataclass(slots=True)
class GroupCard:
    name: str
    version: int
    algorithm: str
    targets: list[TargetRow]
    providers: list[ProviderChoice]
    calls: list[CallView] = field(default_factory=list)
    calls_error: str = ""
    retry_summary: str = ""  # the effective retry settings, as the chain panel says them
    calls_total: int = 0  # calls of this group in the audit records
    calls_capacity: int | None = None  # how many call records are kept (None: no row bound)
    conflict: bool = False
    error: str = ""
    notice: str = ""
    where: str = ""  # the slot the answer is said in: "target:<id>" or "foot" (dashboard.feedback)
    limits: list[LimitRow] = field(default_factory=list)  # use against limits (SPEC §17)

    @property
    def feedback(self) -> Feedback | None:
        """What the card's banner says, for the line beside the button that was pressed."""
        return outcome(
            conflict=self.conflict,
            conflict_text="Not saved: this group was changed in another window — reload to see it.",
            error=f"Not saved: {self.error}" if self.error else "",
            notice=self.notice,
        )

    @property
    def chain(self) -> list[TargetRow]:
        """The targets a call walks through, in order (disabled ones are skipped)."""
        return [t for t in self.targets if t.enabled]


def _moved(ids: list[int], index: int, delta: int) -> str:
    other = index + delta
    if not 0 <= other < len(ids):
        return ""
    order = list(ids)
    order[index], order[other] = order[other], order[index]
    return ",".join(map(str, order))


def provider_choices(providers: Sequence[Mapping[str, Any]]) -> list[ProviderChoice]:
    """Only providers with a loaded model list can be picked (honest placeholders)."""
    return [ProviderChoice(p["name"], tuple(p["models"])) for p in providers if p.get("models")]


def _card(
    detail: Mapping[str, Any],
    badges: Mapping[str, Badge],
    providers: list[ProviderChoice],
    stats: Mapping[str, live_stats.TargetStats],
    specs: Mapping[str, ProviderSpec],
) -> GroupCard:
    targets = sorted(detail["targets"], key=lambda t: t["position"])
    ids = [t["id"] for t in targets]
    rows = [
        TargetRow(
            id=t["id"],
            provider=t["provider"],
            model=t["model"],
            weight=t["weight"],
            enabled=t["enabled"],
            context_window=t["context_window"],
            badge=badges[target_key(t["provider"], t["model"])],
            up_order=_moved(ids, index, -1),
            down_order=_moved(ids, index, +1),
            stats=stats.get(target_key(t["provider"], t["model"])),
            price=_price(t, specs),
        )
        for index, t in enumerate(targets)
    ]
    return GroupCard(
        name=detail["name"],
        version=detail["version"],
        algorithm=str(detail["fields"]["algorithm"]["value"]),
        targets=rows,
        providers=providers,
        retry_summary=retry_summary(detail["fields"]),
        calls_capacity=retention_from_settings()["max_rows"],
    )


def _price(target: Mapping[str, Any], specs: Mapping[str, ProviderSpec]) -> Price | None:
    """The price a call to the target pays, as the routing table prices it (a provider
    not compiled yet: none to look the catalogue up under)."""
    spec = specs.get(target["provider"])
    return None if spec is None else target_price(target["options"], spec, target["model"])


def retry_summary(fields: Mapping[str, Any]) -> str:
    """``5 retries, 500→10000 ms`` (seed 003's panel line), from the effective fields."""
    retries = int(fields["retry.max_retries"]["value"])
    if retries == 0:
        return "no retries: a failure switches at once"
    initial = fields["retry.initial_delay_ms"]["value"]
    cap = fields["retry.max_delay_ms"]["value"]
    return f"{retries} retr{'y' if retries == 1 else 'ies'} per target, {initial}→{cap} ms"


async def _recent_calls(card: GroupCard) -> None:
    try:
        card.calls = [
            call_from_row(row) for row in await calls_recent(group=card.name, limit=CALLS_PER_GROUP)
        ]
        card.calls_total = await calls_count(group=card.name)
    except Exception as exc:  # shown on the card; the rest of the page still works
        log.exception("dashboard: recent calls of %s could not be read", card.name)
        card.calls_error = f"{type(exc).__name__}: {exc}"


async def group_cards(details: Sequence[Mapping[str, Any]]) -> list[GroupCard]:
    """Cards for the given ``selectors.group_detail`` dicts: one health snapshot for all."""
    providers = provider_choices(await sync_to_async(selectors.provider_list)())
    keys = [target_key(t["provider"], t["model"]) for d in details for t in d["targets"]]
    runtime = get_runtime()
    badges = await badges_read(runtime, keys)
    stats = live_stats.current().read(keys, runtime.clock())
    try:
        specs = (await runtime.current_table()).providers
    except TableUnavailable:  # the groups still show (SPEC §7), their prices do not
        specs = {}
    cards = [_card(detail, badges, providers, stats, specs) for detail in details]
    for card, detail in zip(cards, details, strict=True):
        await _recent_calls(card)
        card.limits = await _limit_rows(card.name, detail)
    return cards


async def _limit_rows(name: str, detail: Mapping[str, Any]) -> list[LimitRow]:
    """The group's window limits and their use now (the counters: this process's, or
    Redis); session caps and the loop guard have no group-wide use to show."""
    from routing.limits.spec import GroupLimits
    from routing.limits.usage import group_use

    policy = {field: item.get("value") for field, item in detail.get("fields", {}).items()}
    limits = GroupLimits.of_policy(policy)
    use = await group_use(get_runtime().limit_gate, name=name, limits=limits)
    return [LimitRow(n, u.limit, u.used, u.window) for n, u in use.items()]


async def all_group_cards() -> list[GroupCard]:
    return await group_cards(await sync_to_async(selectors.group_list)())


async def group_card(name: str) -> GroupCard:
    """Raises ``routing.services.NotFound``."""
    detail = await sync_to_async(selectors.group_detail)(name=name)
    [card] = await group_cards([detail])
    return card
