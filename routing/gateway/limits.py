"""Process limits a gateway holding thousands of streams needs, set once at server start.

Every relayed stream holds two sockets (the client's and the upstream's), so a process
that may hold N streams needs about 2N open files; many systems start a process at 1 024.
``raise_open_file_limit`` lifts the soft limit as far as the hard limit allows and logs
what it got, warning when that is below what ``WANTED_OPEN_FILES`` streams need (the
operator raises the hard limit: ``ulimit -Hn``, systemd ``LimitNOFILE=``, docker
``--ulimit nofile=``).

The upstream connection pool is sized from the same number: a stream keeps its upstream
connection for its whole life, so a pool smaller than the streams the process can hold
makes the extra calls wait for a connection and fail (the old fixed 512 did at 513).

The garbage collector is tuned for the same load (``tune_garbage_collection``): with
thousands of streams open, CPython's default young threshold sets off full collections
that stop the event loop for up to a second.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

log = logging.getLogger("switchyard.limits")

WANTED_OPEN_FILES = 65536  # room for ~32 000 streams
RESERVED_FILES = 256  # listening sockets, the database, Redis, logs, imports
MIN_UPSTREAM_CONNECTIONS = 512

try:
    import resource
except ImportError:  # not POSIX: nothing to raise, nothing to read
    resource = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class OpenFileLimit:
    before: int
    after: int
    hard: int | None  # None: unlimited
    raised: bool
    problem: str | None = None

    @property
    def streams(self) -> int:
        """About how many relayed streams fit (two files each)."""
        return max(0, (self.after - RESERVED_FILES) // 2)


def raise_open_file_limit(wanted: int = WANTED_OPEN_FILES) -> OpenFileLimit | None:
    """Lift ``RLIMIT_NOFILE``'s soft limit to ``wanted`` or the hard limit, whichever is
    lower; log the outcome. Returns None where the platform has no such limit."""
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    hard_value = None if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft >= ceiling:
        result = OpenFileLimit(soft, soft, hard_value, raised=False)
    else:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
        except (ValueError, OSError) as exc:
            result = OpenFileLimit(soft, soft, hard_value, raised=False, problem=str(exc))
        else:
            result = OpenFileLimit(soft, ceiling, hard_value, raised=True)
    _report(result, wanted)
    return result


def _report(limit: OpenFileLimit, wanted: int) -> None:
    if limit.problem:
        log.warning(
            "could not raise the open-file limit above %d (%s): about %d concurrent streams "
            "fit; raise the hard limit (ulimit -Hn, LimitNOFILE=) for more",
            limit.after,
            limit.problem,
            limit.streams,
        )
    elif limit.after < wanted:
        log.warning(
            "open-file limit %d (the hard limit%s): about %d concurrent streams fit; "
            "raise the hard limit (ulimit -Hn, LimitNOFILE=) for more",
            limit.after,
            f", raised from {limit.before}" if limit.raised else "",
            limit.streams,
        )
    elif limit.raised:
        log.info(
            "open-file limit raised from %d to %d (about %d concurrent streams)",
            limit.before,
            limit.after,
            limit.streams,
        )


def current_open_files() -> int | None:
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def upstream_connections(configured: int = 0) -> int:
    """Connections per provider pool: ``configured`` when set (> 0), else as many streams
    as the open-file limit holds (at least 512)."""
    if configured > 0:
        return configured
    soft = current_open_files()
    if soft is None:
        return WANTED_OPEN_FILES // 2
    return max(MIN_UPSTREAM_CONNECTIONS, (soft - RESERVED_FILES) // 2)


# A young collection runs once container objects made exceed those freed by this many
# (CPython's default: 700). Objects that wait for a stream's next chunk (the read's future
# and timer handle) live one chunk gap: at the default, with thousands of streams open, they
# outlive two young collections and are promoted to the oldest generation, and once those
# promotions reach a quarter of what the last full collection kept, the next one walks
# every object of every open stream while the loop stands still: 37-47 % of the process's
# time at 5,000 streams, in pauses of up to 1.4 s (bench scenario h). At 50,000 few such
# objects are promoted. This is safe only because a finished call is freed by reference
# counting (tests/gateway/test_call_memory.py): cyclic garbage that reached the oldest generation would
# now wait long for a full collection (before the cycles were broken, a 10-minute soak grew
# from 241 to 869 MB with this setting; after, 238 to 253 MB, flat from the fifth minute).
YOUNG_COLLECTION_EVERY = 50_000


def tune_garbage_collection(young: int = YOUNG_COLLECTION_EVERY) -> None:
    """Called once the application is built: what was made at start lives as long as the
    process, so it leaves the collector (``gc.freeze``: full collections no longer walk it),
    and young collections wait for ``young`` more objects, so objects that live a chunk gap
    die young."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
    log.info(
        "garbage collection: %d objects frozen at start, young every %d",
        gc.get_freeze_count(),
        young,
    )
