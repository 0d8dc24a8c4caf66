"""Requests refused for want of a valid key: counted, and only sampled into the ledger.

Every refusal used to be a call record, so anyone who can reach ``/v1`` without a key
could fill the ledger (capped at 200,000 rows by default) with refusals and push real
history out. :class:`KeylessRefusals` counts them all (``/metrics``, ``/api/v1/status``,
the Calls page) and lets at most one per source address and minute through to the
ledger, for at most :data:`SOURCES_PER_MINUTE` sources a minute: its memory is that
many addresses whatever the number of addresses a sender uses, and an anonymous
sender's rows are at most that many a minute.

Pure and O(1) per refusal: the caller passes the time (the runtime's clock) and the
source. A refusal with a valid key (a bad body, an unknown model, a limit) is not one
of these: it stays on the record, as every call does.
"""

from __future__ import annotations

import threading

MINUTE_S = 60.0
SOURCES_PER_MINUTE = 20


class KeylessRefusals:
    __slots__ = ("count", "sampled", "limit", "_minute", "_sources", "_lock")

    def __init__(self, limit: int = SOURCES_PER_MINUTE) -> None:
        self.limit = limit
        self.count = 0  # refused since the start, recorded or not
        self.sampled = 0  # of which recorded
        self._minute = -1
        self._sources: set[str] = set()
        self._lock = threading.Lock()

    def record(self, source: str, now: float) -> bool:
        """Count one refusal from ``source`` at ``now`` (epoch seconds); whether it is the
        one of its source and minute to go on the record."""
        minute = int(now // MINUTE_S)
        with self._lock:
            self.count += 1
            if minute != self._minute:
                self._minute = minute
                self._sources.clear()  # at most ``limit`` entries
            if source in self._sources or len(self._sources) >= self.limit:
                return False
            self._sources.add(source)
            self.sampled += 1
            return True
