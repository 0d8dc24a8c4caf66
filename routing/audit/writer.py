"""The audit writer: a bounded in-memory queue drained by one background thread.

The call path must never wait for the database (SPEC §6, §10). Hub subscribers run on
the event loop, so :meth:`AuditWriter.offer` only appends to a bounded queue under a
lock held for a few instructions; a daemon thread takes up to ``batch_size`` items at
a time (or whatever is there every ``interval_s``), turns them into rows and inserts
them with the sync ORM in one transaction.

Failure policy, chosen so that a sick database can only lose records, never calls:

- queue full → the new record is dropped and counted (``dropped``); the thread logs
  one line per drain cycle in which drops happened;
- text and JSON values are stored as the database can hold them (``routing.audit.rows``:
  a NUL, which PostgreSQL refuses, is replaced);
- a batch the database refuses for a record's data (``DataError``, ``IntegrityError``, a
  value no row can hold) → written again record by record, each in its own transaction:
  only the refused record is lost, logged (one line, with its call id) and counted
  (``failed``) — one client's bad value never costs another client's record;
- a batch that cannot be written otherwise (the database is down) → logged (one line),
  counted (``failed``) and dropped; never retried, so a broken database cannot grow memory
  or replay stale records.

Process wiring: one writer per process (:func:`get_writer`), subscribed to the runtime's
hub by :func:`attach`. :func:`start` attaches to ``get_runtime().hub`` and is what the
first request of a serving process triggers (``AuditConfig.ready``); it follows the hub
when the runtime or its hub is replaced. :func:`flush` waits until everything queued
so far is settled (tests; process exit).

The database is a seam: ``AuditWriter(write=...)`` takes the function that stores one
batch's rows (``rows_write`` by default), so a slow or failing database is a fake passed
in, and :func:`install` puts such a writer in place of the process's (like
``install_runtime``).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import DataError, IntegrityError, close_old_connections, connection

from routing.audit.rows import Rows, rows_from, rows_write
from routing.gateway.events import Event, EventHub

log = logging.getLogger("switchyard.audit")

QUEUE_CAPACITY = 20_000
BATCH_SIZE = 500
INTERVAL_S = 0.2
PRUNE_EVERY_S = 600.0
EXIT_FLUSH_S = 5.0


@dataclass(frozen=True, slots=True)
class WriterStats:
    accepted: int  # taken into the queue
    written: int  # inserted into the database
    failed: int  # lost with a batch the database refused
    dropped: int  # refused because the queue was full
    pending: int  # accepted, not yet settled


def _configured_secrets() -> list[str]:
    """Every credential of the current routing table, for a second scrub of messages."""
    from routing.gateway.runtime import get_runtime

    table = get_runtime().table
    if table is None:
        return []
    return [s for p in table.providers.values() for s in p.secrets if s]


class AuditWriter:
    def __init__(
        self,
        *,
        capacity: int = QUEUE_CAPACITY,
        batch_size: int = BATCH_SIZE,
        interval_s: float = INTERVAL_S,
        prune_every_s: float | None = PRUNE_EVERY_S,
        secrets: Callable[[], Iterable[str]] = _configured_secrets,
        write: Callable[[Rows], None] = rows_write,
    ) -> None:
        self.capacity = capacity
        self.batch_size = batch_size
        self.interval_s = interval_s
        self.prune_every_s = prune_every_s
        self._write_rows = write
        self._secrets = secrets
        self._known_secrets: list[str] = []
        self._items: deque[Any] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._accepted = self._settled = self._written = self._failed = self._dropped = 0
        self._dropped_logged = 0
        self._urgent = False
        self._stopping = False
        self._last_prune = time.monotonic()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ producer side
    def offer(self, item: object) -> bool:
        """Queue one event or note; False (and counted) when the queue is full. Never blocks."""
        with self._cond:
            if len(self._items) >= self.capacity:
                self._dropped += 1
                return False
            self._items.append(item)
            self._accepted += 1
            if len(self._items) >= self.batch_size:
                self._cond.notify()
            return True

    def receive(self, event: Event) -> None:
        """Hub subscriber: :meth:`offer` without the result."""
        self.offer(event)

    def stats(self) -> WriterStats:
        with self._cond:
            return WriterStats(
                accepted=self._accepted,
                written=self._written,
                failed=self._failed,
                dropped=self._dropped,
                pending=self._accepted - self._settled,
            )

    def flush(self, timeout: float) -> bool:
        """Wait until every record accepted before this call is written or given up on."""
        with self._cond:
            goal = self._accepted
            self._urgent = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._settled >= goal, timeout=timeout)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="switchyard-audit", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Write what is queued, then end the thread (writers built by tests)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------------ writer thread
    def _ready(self) -> bool:
        return len(self._items) >= self.batch_size or self._urgent or self._stopping

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(self._ready, timeout=self.interval_s)
                if self._stopping and not self._items:
                    return
                batch = [
                    self._items.popleft() for _ in range(min(len(self._items), self.batch_size))
                ]
                if not self._items:
                    self._urgent = False
            if batch:
                self._write(batch)
            self._report_drops()
            self._maybe_prune()

    def _write(self, batch: list[Any]) -> None:
        """Store ``batch`` in one transaction; when the database refuses a record's data,
        store it record by record, so that only the record it refuses is lost."""
        written = 0
        try:
            failure = self._store(batch)
            if failure is None:
                written = len(batch)
            elif isinstance(failure, RECORD_ERRORS):
                written = self._store_each(batch)
            else:
                log.error(
                    "audit: dropped a batch of %d records: %s: %s",
                    len(batch),
                    type(failure).__name__,
                    failure,
                )
        finally:
            close_old_connections()
            with self._cond:
                self._settled += len(batch)
                self._written += written
                self._failed += len(batch) - written
                self._cond.notify_all()

    def _store(self, batch: list[Any]) -> Exception | None:
        """Write ``batch``'s rows: None, or why not. A record that cannot become a row is
        the record's failure (a ``ValueError``), not the database's."""
        try:
            rows = rows_from(batch, self._secrets_now())
        except Exception as exc:  # noqa: BLE001 - one record's bad value
            return ValueError(f"{type(exc).__name__}: {exc}")
        try:
            close_old_connections()
            self._write_rows(rows)
        except Exception as exc:  # noqa: BLE001 - any failure loses records, never the thread
            if not isinstance(exc, RECORD_ERRORS):
                _discard_connection()
            return exc
        return None

    def _store_each(self, batch: list[Any]) -> int:
        """Each record in a transaction of its own; one ERROR line per record lost (with its
        call id). If the database itself fails on the way, the rest goes as a batch."""
        written = 0
        for position, item in enumerate(batch):
            failure = self._store([item])
            if failure is None:
                written += 1
            elif isinstance(failure, RECORD_ERRORS):
                log.error(
                    "audit: dropped the record of %s: %s: %s",
                    _label(item),
                    type(failure).__name__,
                    _first_line(failure),
                )
            else:
                log.error(
                    "audit: dropped %d records: %s: %s",
                    len(batch) - position,
                    type(failure).__name__,
                    _first_line(failure),
                )
                break
        return written

    def _secrets_now(self) -> list[str]:
        """The table may be mid-rebuild (None): keep the last credentials seen."""
        try:
            current = list(self._secrets())
        except Exception:  # noqa: BLE001 - the second scrub is a safety net, not a gate
            current = []
        if current:
            self._known_secrets = current
        return self._known_secrets

    def _report_drops(self) -> None:
        dropped = self._dropped
        if dropped > self._dropped_logged:
            log.warning(
                "audit: queue full (%d records), dropped %d records (%d in total)",
                self.capacity,
                dropped - self._dropped_logged,
                dropped,
            )
            self._dropped_logged = dropped

    def _maybe_prune(self) -> None:
        if self.prune_every_s is None or time.monotonic() - self._last_prune < self.prune_every_s:
            return
        self._last_prune = time.monotonic()
        from routing.audit.retention import records_prune, retention_from_settings

        try:
            close_old_connections()
            deleted = records_prune(**retention_from_settings())
        except Exception as exc:  # noqa: BLE001
            log.error("audit: pruning failed: %s: %s", type(exc).__name__, exc)
            _discard_connection()
            return
        finally:
            close_old_connections()
        if any(deleted.values()):
            log.info(
                "audit: pruned %s", ", ".join(f"{n} {kind}" for kind, n in deleted.items() if n)
            )


# What the database (or the mapping to rows) says about a record's own data, rather than
# about the database: a batch failing so is written again record by record.
RECORD_ERRORS: tuple[type[Exception], ...] = (DataError, IntegrityError, ValueError)


def _label(item: object) -> str:
    """Which record it was, for the log line that says it is lost."""
    call_id = getattr(item, "call_id", None)
    if call_id:
        return f"call {call_id}"
    return type(item).__name__


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.split("\n", 1)[0]


def _discard_connection() -> None:
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - it was already broken
        pass


# ---------------------------------------------------------------------- process wiring
_writer: AuditWriter | None = None
_hub: EventHub | None = None
_unsubscribe: list[Callable[[], None]] = []
_lock = threading.Lock()


def get_writer() -> AuditWriter:
    """The process's writer, created and started on first use."""
    global _writer
    writer = _writer
    if writer is None:
        with _lock:
            if _writer is None:
                _writer = AuditWriter()
                _writer.start()
                atexit.register(_flush_at_exit)
            writer = _writer
    return writer


def attach(hub: EventHub) -> None:
    """Record ``hub``'s events, detaching from the previously attached hub."""
    global _hub
    writer = get_writer()
    with _lock:
        if hub is _hub:
            return
        for unsubscribe in _unsubscribe:
            try:
                unsubscribe()
            except ValueError:  # that hub was cleared or replaced already
                pass
        _unsubscribe[:] = [hub.subscribe(writer.receive)]
        _hub = hub


def install(writer: AuditWriter) -> AuditWriter | None:
    """Put ``writer`` (started) in place of the process's writer, attached to the hub the
    old one followed; returns the old one (tests: a slow or failing database)."""
    global _writer, _hub
    writer.start()
    with _lock:
        previous, hub = _writer, _hub
        _writer, _hub = writer, None
    if previous is None:  # get_writer() never ran: the exit flush is not registered yet
        atexit.register(_flush_at_exit)
    if hub is not None:
        attach(hub)
    return previous


def start() -> AuditWriter:
    """Idempotent: the writer running and attached to the current runtime's hub.

    The runtime calls :func:`attach` itself for every hub it installs (it is listed in
    ``settings.SWITCHYARD["EVENT_SUBSCRIBERS"]``); this is for callers without a runtime yet."""
    from routing.gateway.runtime import get_runtime

    attach(get_runtime().hub)
    return get_writer()


def flush(timeout: float = 5.0) -> bool:
    """Wait until every record queued so far is settled; True unless ``timeout`` passed."""
    return _writer.flush(timeout) if _writer is not None else True


def _flush_at_exit() -> None:
    flush(EXIT_FLUSH_S)
