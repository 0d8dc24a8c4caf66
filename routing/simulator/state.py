"""The fake upstream's memory: scripts, counters and recorded requests.

Shared between the caller's thread (tests scripting and asserting) and the server's
event-loop thread, so every access goes through one ``threading.Condition``. Nothing
here blocks the event loop for more than a dictionary update.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from routing.simulator.script import Behaviour, Reply


@dataclass
class RecordedRequest:
    """One ``POST /v1/chat/completions`` as the upstream saw it.

    ``headers`` keys are lower-cased. Times are ``time.monotonic()`` seconds;
    ``finished_at`` is None while the request is being served. ``disconnected`` is True
    when the client went away before the behaviour finished (not when the behaviour
    itself cut the connection, as ``Reset`` / ``DropAfter`` do).
    """

    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    started_at: float
    finished_at: float | None = None
    disconnected: bool = False
    raw: bytes = b""  # the body exactly as received (byte-for-byte capture tests)


@dataclass
class _Script:
    queue: deque[Behaviour] = field(default_factory=deque)
    then: Behaviour | None = None


class Ledger:
    """Scripts per model plus what happened; thread-safe."""

    def __init__(
        self, default: Behaviour | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._cond = threading.Condition()
        self._clock = clock
        self._initial_default: Behaviour = default if default is not None else Reply()
        self._default = self._initial_default
        self._scripts: dict[str, _Script] = {}
        self._counts: Counter[str] = Counter()
        self._flaky: Counter[str] = Counter()
        self._records: list[RecordedRequest] = []
        self._open = 0  # kept apart from _records: reset() must not lose in-flight requests
        # What the behaviours wait with (Delay, Reply's think_s and chunk_delay_s): a test
        # puts its virtual clock's sleep here to let minutes pass at once; reset() restores.
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    # -- scripting -------------------------------------------------------------------
    def script(
        self,
        model: str,
        behaviours: tuple[Behaviour, ...] | list[Behaviour],
        then: Behaviour | None = None,
    ) -> None:
        """Replace ``model``'s queue (and its ``then``)."""
        with self._cond:
            self._scripts[model] = _Script(deque(behaviours), then)

    def set_default(self, behaviour: Behaviour) -> None:
        with self._cond:
            self._default = behaviour

    def reset(self) -> None:
        """Forget scripts, counters and records, and restore the constructor's default
        (so a server shared by many tests starts each one from the same state)."""
        with self._cond:
            self._default = self._initial_default
            self.sleep = asyncio.sleep
            self._scripts.clear()
            self._counts.clear()
            self._flaky.clear()
            self._records.clear()

    def next_behaviour(self, model: str) -> Behaviour:
        with self._cond:
            script = self._scripts.get(model)
            if script is None:
                return self._default
            if script.queue:
                return script.queue.popleft()
            return script.then if script.then is not None else self._default

    def flaky_tick(self, model: str) -> int:
        """Number (1-based) of this request among ``model``'s requests served by a Flaky."""
        with self._cond:
            self._flaky[model] += 1
            return self._flaky[model]

    def scripted_models(self) -> list[str]:
        with self._cond:
            return list(self._scripts)

    # -- recording -------------------------------------------------------------------
    def begin(
        self,
        model: str,
        body: dict[str, Any],
        headers: dict[str, str],
        path: str,
        raw: bytes = b"",
    ) -> RecordedRequest:
        record = RecordedRequest(model, body, headers, path, started_at=self._clock(), raw=raw)
        with self._cond:
            self._records.append(record)
            self._counts[model] += 1
            self._open += 1
        return record

    def finish(self, record: RecordedRequest, *, disconnected: bool) -> None:
        with self._cond:
            if record.finished_at is not None:  # already closed (e.g. cancelled after abort)
                return
            record.finished_at = self._clock()
            record.disconnected = disconnected
            self._open -= 1
            self._cond.notify_all()

    def count(self, model: str | None = None) -> int:
        with self._cond:
            return self._counts[model] if model is not None else sum(self._counts.values())

    def records(self) -> list[RecordedRequest]:
        """Copies, so a caller can read them while the server keeps updating its own."""
        with self._cond:
            return [dataclasses.replace(r) for r in self._records]

    def open_requests(self) -> int:
        with self._cond:
            return self._open

    def wait_idle(self, timeout: float) -> bool:
        """Block until no request is being served; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._open == 0, timeout)

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {
                "total": sum(self._counts.values()),
                "by_model": dict(self._counts),
                "open": self._open,
                "disconnected": sum(1 for r in self._records if r.disconnected),
            }
