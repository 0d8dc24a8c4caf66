"""The audit writer's CPU per call record, in process: ``python -m bench.audit_writer``
(about 5 s; ``--database-url`` for PostgreSQL).

Under load the writer thread shares the gateway's GIL with every call, so its CPU per call
is part of what a call costs (``bench.run`` counts it in the gateway's CPU, mixed with the
rest). This times the writer's own work alone: batches of ``BATCH_SIZE`` call records of
the bench's shape (one answered attempt with usage; one call in ten a failover of two
attempts), turned into rows (``rows_from``) and written (``rows_write``) on a fresh
database migrated here, as the writer thread does. CPU of the measuring thread
(``time.thread_time``) per call record, the median of ``--rounds`` rounds and every
round's figure; SQLite's own work is in it (it runs in the thread), a PostgreSQL server's
is not (another process).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN = secrets.token_hex(6)  # call ids unique across runs into one database


def _records(count: int, start: int) -> list[Any]:
    from routing.engine.plan import SwitchReason
    from routing.gateway.events import AttemptRecord, CallRecord

    out = []
    for n in range(start, start + count):
        answered = AttemptRecord(target="p1/fast", try_number=1, ok=True, elapsed_ms=0.31)
        attempts = [answered]
        if n % 10 == 0:  # a failover
            failed = AttemptRecord(
                "p0/slow", 1, False, 2.5, code="SERVER", status=503, message="boom",
                switched=True, reason=SwitchReason.RETRY_EXHAUSTED, switched_to="p1/fast",
            )  # fmt: skip
            attempts = [failed, answered]
        out.append(
            CallRecord(
                call_id=f"{RUN}{n:020x}",
                group="bench",
                session=None,
                stream=False,
                started_at=time.time(),
                served_by="p1/fast",
                usage={"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
                attempts=attempts,
                elapsed_ms=0.62,
                ttft_ms=0.51,
                key_name="bench",
                trace_id="",
            )
        )
    return out


def measure(records_per_round: int, rounds: int) -> list[float]:
    """µs of the writer's CPU per call record, one figure per round."""
    import django

    django.setup()
    from django.core.management import call_command

    from routing.audit.rows import rows_from, rows_write
    from routing.audit.writer import BATCH_SIZE

    call_command("migrate", verbosity=0)
    scrubbed = ["sk-bench-secret-0123456789"]  # one configured credential to scrub
    warm = _records(BATCH_SIZE, 10**9)
    rows_write(rows_from(warm, scrubbed))  # statements prepared, caches and imports settled
    figures: list[float] = []
    serial = 0
    for _ in range(rounds):
        batches = []
        for _ in range(max(1, records_per_round // BATCH_SIZE)):
            batches.append(_records(BATCH_SIZE, serial))
            serial += BATCH_SIZE
        started = time.thread_time()
        for batch in batches:
            rows_write(rows_from(batch, scrubbed))
        spent = time.thread_time() - started
        figures.append(spent / sum(len(b) for b in batches) * 1e6)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_writer", description=__doc__)
    parser.add_argument("--records", type=int, default=3000, help="call records per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--database-url",
        default="",
        help="a database to write to, migrated first (default: a new SQLite file)",
    )
    args = parser.parse_args(argv)
    if args.records < 1 or args.rounds < 1:
        parser.error("--records and --rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="switchyard-audit-") as work:
        os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{work}/audit.sqlite3"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "router_project.settings")
        sys.path.insert(0, str(ROOT))
        figures = measure(args.records, args.rounds)
    print(
        f"audit writer: {statistics.median(figures):.1f} µs CPU per call record (median of "
        f"{len(figures)} rounds of {args.records}: {', '.join(f'{f:.1f}' for f in figures)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
