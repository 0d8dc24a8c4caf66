"""What every upstream kind's client shares with its callers: the timeouts it keeps and
the one exception it raises.

Exception tree::

    UpstreamFailure(Exception)        carries .failure: routing.engine.failures.Failure
                                      and .usage: what was reported before it failed

Nothing above ``routing.upstream`` catches a foreign exception: httpx's and aiohttp's are
translated once, in ``routing.upstream.transport``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from routing.engine.failures import Failure


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 5.0
    first_token_s: float = 240.0
    idle_s: float = 60.0
    total_s: float = 600.0
    headers_s: float = 10.0  # a stream's send → response headers (docs/outages.md)


class UpstreamFailure(Exception):
    """An upstream outcome that is not a usable answer, already classified."""

    def __init__(self, failure: Failure, usage: dict[str, Any] | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        # What the upstream reported using before it failed (a stream's usage chunk before
        # its error): the attempt is paid for all the same (SPEC §17).
        self.usage = usage
