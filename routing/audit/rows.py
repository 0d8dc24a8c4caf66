"""Turn queued events into audit rows and write a batch of them (sync ORM, writer thread).

``RetryEvent`` has no row of its own: the retried attempt is already in its call's
attempts (``will_retry``). Any other object in a batch is ignored, so the hub can grow
new event types without breaking the writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connections, models, router, transaction

from routing.audit.models import (
    MESSAGE_MAX,
    Attempt,
    Call,
    ConfigChange,
    Fallback,
    HealthTransition,
)
from routing.engine.failures import scrub
from routing.engine.health import HealthEvent
from routing.gateway.events import CallRecord, FallbackEvent


@dataclass(frozen=True, slots=True)
class ConfigChangeNote:
    """A config change waiting in the queue; already redacted and diffed by the service."""

    at: datetime
    actor: str
    path: str
    object_type: str
    object_name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    diff: dict[str, Any]


@dataclass(slots=True)
class Rows:
    calls: list[Call] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    health: list[HealthTransition] = field(default_factory=list)
    changes: list[ConfigChange] = field(default_factory=list)


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


class _Cleaner:
    """Scrubs every configured credential out of free text and caps its length."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = [s for s in secrets if s]

    def __call__(self, text: str | None) -> str:
        if not text:
            return ""
        return scrub(text, self.secrets)[:MESSAGE_MAX]


def _tokens(usage: Mapping[str, Any] | None, name: str) -> int | None:
    value = (usage or {}).get(name)
    return value if isinstance(value, int) and value >= 0 else None


def _call_rows(record: CallRecord, clean: _Cleaner, rows: Rows) -> None:
    rows.calls.append(
        Call(
            call_id=record.call_id,
            group=record.group,
            session=(record.session or "")[:200],
            stream=record.stream,
            outcome=record.outcome,
            served_by=record.served_by or "",
            error_code=record.error_code or "",
            http_status=record.http_status,
            started_at=_when(record.started_at),
            elapsed_ms=record.elapsed_ms,
            ttft_ms=record.ttft_ms,
            overhead_ms=record.overhead_ms,
            # what every attempt was billed, as its cost and the token budgets count it
            prompt_tokens=_tokens(record.billed, "prompt_tokens"),
            completion_tokens=_tokens(record.billed, "completion_tokens"),
            total_tokens=_tokens(record.billed, "total_tokens"),
            cost=record.cost,
            attempt_count=len(record.attempts),
            key_id=record.key_id,
            key_name=record.key_name[:100],
            front_door=record.door,
            served_by_fallback=record.served_by_fallback,
            reason=clean(record.reason)[:500],
            trace_id=record.trace_id,
        )
    )
    for index, attempt in enumerate(record.attempts, start=1):
        rows.attempts.append(
            Attempt(
                call_id=record.call_id,
                index=index,
                target=attempt.target,
                try_number=attempt.try_number,
                ok=attempt.ok,
                code=attempt.code or "",
                status=attempt.status,
                message=clean(attempt.message),
                reason=attempt.reason or "",
                elapsed_ms=attempt.elapsed_ms,
                will_retry=attempt.will_retry,
                switched=attempt.switched,
                switched_to=attempt.switched_to or "",
                probe=attempt.probe,
                rewrites=",".join(attempt.rewrites)[:500],
                upstream_kind=attempt.kind,
                continuation=attempt.continuation,
                cooldown_s=attempt.cooldown_s,
            )
        )


def _fallback_row(event: FallbackEvent, clean: _Cleaner) -> Fallback:
    return Fallback(
        at=_when(event.at),
        call_id=event.call_id,
        group=event.group,
        from_target=event.from_target,
        to_target=event.to_target or "",
        reason=event.reason,
        code=event.code,
        status=event.status,
        message=clean(event.message),
        cooldown_s=event.cooldown_s,
    )


def _health_row(event: HealthEvent, clean: _Cleaner) -> HealthTransition:
    message = clean(event.message)
    return HealthTransition(
        at=_when(event.at),
        kind=event.kind.value,
        target=event.target or "",
        provider=event.provider or "",
        until=_when(event.until) if event.until else None,
        code=event.code or "",
        ok=event.ok,
        cooldown_s=event.cooldown_s,
        actor=event.actor[:200],
        message=message,
        call_id=event.call_id,
    )


def _change_row(note: ConfigChangeNote) -> ConfigChange:
    return ConfigChange(
        at=note.at,
        actor=note.actor[:200],
        path=note.path,
        object_type=note.object_type,
        object_name=note.object_name,
        before=note.before,
        after=note.after,
        diff=note.diff,
    )


def rows_from(batch: Sequence[object], secrets: Iterable[str] = ()) -> Rows:
    clean = _Cleaner(secrets)
    rows = Rows()
    for item in batch:
        if isinstance(item, CallRecord):
            _call_rows(item, clean, rows)
        elif isinstance(item, FallbackEvent):
            rows.fallbacks.append(_fallback_row(item, clean))
        elif isinstance(item, HealthEvent):
            rows.health.append(_health_row(item, clean))
        elif isinstance(item, ConfigChangeNote):
            rows.changes.append(_change_row(item))
    return rows


def rows_write(rows: Rows) -> None:
    """Insert one batch in one transaction: all of it is written, or none."""
    with transaction.atomic():
        insert_many(Call, rows.calls)
        insert_many(Attempt, rows.attempts)
        insert_many(Fallback, rows.fallbacks)
        insert_many(HealthTransition, rows.health)
        insert_many(ConfigChange, rows.changes)


# What PostgreSQL cannot hold, in text (NUL) and in jsonb (``\u0000``), and what takes its
# place: the replacement character shows that something was there. SQLite could hold it;
# both get the same, so a record reads the same whichever database the ledger is on.
NUL, NUL_MARK = "\x00", "\ufffd"


def holdable(value: Any) -> Any:
    """``value`` (text, or JSON: dicts, lists, scalars) with every NUL replaced, keys too."""
    if isinstance(value, str):
        return value.replace(NUL, NUL_MARK) if NUL in value else value
    if isinstance(value, dict):
        return {holdable(k): holdable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [holdable(v) for v in value]
    return value


def insert_many(model: type[models.Model], objs: Sequence[models.Model]) -> None:
    """``bulk_create`` for the audit tables, without the SQL compiler.

    Profiling showed the ORM compiling each batch's multi-row INSERT (per row, per field)
    as most of the audit writer's CPU — a fifth of the gateway's under load, on the same
    GIL as the calls. One prepared statement run by ``executemany`` keeps the same field
    preparation and skips the rest; a value that Django's preparation would hand on as it
    is (``_Column``) is read straight off the object.
    """
    if not objs:
        return
    connection = connections[router.db_for_write(model)]
    columns = _columns(model, connection)
    quote = connection.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        quote(model._meta.db_table),
        ", ".join(quote(column.field.column or "") for column in columns),
        ", ".join(["%s"] * len(columns)),
    )
    params = [tuple(column.value(obj, connection) for column in columns) for obj in objs]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


class _Column:
    """One field's value for the INSERT: Django's ``pre_save`` + ``get_db_prep_save``,
    except for a value of the type a plain field stores as it is (a ``str`` in a text
    field, an ``int`` in an integer one, a ``float`` in a float one, a ``bool`` in a
    boolean one, or None), which those calls would only pass along: per field and row
    they were most of the writer's remaining CPU. Whether they only pass it along is
    asked of the connection's backend, not assumed: PostgreSQL's wraps every integer in
    psycopg's ``Int2``/``Int4``/``Int8``, so there integers keep Django's path.
    ``tests/audit/test_insert_many.py`` holds both paths to the same parameters.

    Text and JSON values are made :func:`holdable` here, the one place every audit row's
    values pass: a client's ``user`` or model name with a NUL in it is stored (marked), not
    refused by PostgreSQL along with the rest of its batch. A ``str`` costs one scan."""

    __slots__ = ("field", "attname", "plain", "text", "json")

    def __init__(self, field: models.Field[Any, Any], connection: Any) -> None:
        self.field, self.attname = field, field.attname
        self.text = isinstance(field, models.CharField | models.TextField)
        self.json = isinstance(field, models.JSONField)
        self.plain: tuple[type, ...] = next(
            (
                types
                for kind, types in _PLAIN
                if isinstance(field, kind) and _passed_as_is(field, types[0], connection)
            ),
            (),
        )

    def value(self, obj: models.Model, connection: Any) -> Any:
        if self.plain:
            value = getattr(obj, self.attname)
            if value is None or type(value) in self.plain:
                if self.text and value and NUL in value:
                    return value.replace(NUL, NUL_MARK)
                return value
        field = self.field
        value = field.pre_save(obj, True)
        if self.text or self.json:
            value = holdable(value)
        return field.get_db_prep_save(value, connection)


# Fields whose preparation may return a value of these exact types unchanged (Django 5.2:
# ``to_python``/``int()``/``float()``/``bool`` of the value); ``_passed_as_is`` asks the
# backend whether it adds an adapter of its own.
_PLAIN: tuple[tuple[type[models.Field[Any, Any]], tuple[type, ...]], ...] = (
    (models.CharField, (str,)),
    (models.TextField, (str,)),
    (models.BooleanField, (bool,)),
    (models.IntegerField, (int,)),
    (models.FloatField, (float,)),
)
_SAMPLES: dict[type, tuple[Any, ...]] = {
    str: ("", "x"),
    bool: (True, False),
    int: (0, 7, -7),
    float: (0.0, 2.5, -1e300),
}
_COLUMNS: dict[tuple[type[models.Model], str], list[_Column]] = {}


def _passed_as_is(field: models.Field[Any, Any], kind: type, connection: Any) -> bool:
    for sample in _SAMPLES[kind]:
        prepared = field.get_db_prep_save(sample, connection)
        if type(prepared) is not kind or prepared != sample:
            return False
    return True


def _columns(model: type[models.Model], connection: Any) -> list[_Column]:
    key = (model, connection.alias)
    found = _COLUMNS.get(key)
    if found is None:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        found = _COLUMNS[key] = [_Column(f, connection) for f in fields]
    return found
