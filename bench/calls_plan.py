"""The calls page's queries on a big ledger: do they use the indexes, and how long do they take?

    .venv/bin/python -m bench.calls_plan                  # 1,000,000 calls, SQLite temp file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/plan .venv/bin/python -m bench.calls_plan
    .venv/bin/python -m bench.calls_plan --rows 200000

It migrates a scratch database, generates ``--rows`` calls (and one attempt each) in the
database itself (a recursive CTE / ``generate_series``: seconds, not minutes), runs
``ANALYZE``, then for each filter of the calls page prints the plan of its first page and
of a deep page (keyset ``before`` half-way down) and the median time of five runs. The
``code`` and ``target`` filters are timed twice: with a common value, and with one that
only one call in 100,000 has (a page of those may have to look at every call). Last, the
keys page's ``key_usage()``, which reads the whole ledger on every render.

:func:`page_plans` and :func:`key_usage_plan` are also used by
``tests/audit/test_call_plan.py`` on a smaller table.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.db.models import QuerySet

GROUPS = ("auto", "coding", "batch", "chat")
TARGETS = ("p1/a", "p2/b", "p3/c", "p4/d", "p5/e")
BASE = datetime(2026, 12, 1, tzinfo=UTC)
# One call in RARE_EVERY failed on a target and with a code no other call has: the worst
# case of a filter that checks each call's attempts (a page may need the whole ledger).
RARE_EVERY = 100_000
RARE_TARGET = "p9/rare"
RARE_CODE = "QUOTA"


def rare_rows(rows: int) -> list[int]:
    """The ``n`` of the rare calls: one in ``RARE_EVERY``, and at least one in a small run."""
    first = min(RARE_EVERY // 2, max(1, rows // 2))
    return list(range(first, rows + 1, RARE_EVERY))


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    plan: str
    uses_index: bool
    ms: float


def generate(rows: int) -> None:
    """``rows`` calls, one attempt each, spread over ``rows`` seconds from ``BASE``:
    groups round-robin, every 7th failed with SERVER, key ids 1..50, sessions 1..1000;
    the :func:`rare_rows` failed on ``RARE_TARGET`` with ``RARE_CODE``."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            series = "SELECT generate_series(1, %s) AS n"
            seconds = (
                "(TIMESTAMP WITH TIME ZONE '2026-12-01 00:00:00+00' + n * INTERVAL '1 second')"
            )
            text = "n::text"
            cte = f"WITH s AS ({series})"
        else:
            cte = "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %s)"
            seconds = (
                "strftime('%%Y-%%m-%%d %%H:%%M:%%f', '2026-12-01 00:00:00', '+' || n || ' seconds')"
            )
            text = "CAST(n AS TEXT)"
        groups = "CASE n %% 4 WHEN 0 THEN 'auto' WHEN 1 THEN 'coding' WHEN 2 THEN 'batch' ELSE 'chat' END"
        target = "CASE n %% 5 WHEN 0 THEN 'p1/a' WHEN 1 THEN 'p2/b' WHEN 2 THEN 'p3/c' WHEN 3 THEN 'p4/d' ELSE 'p5/e' END"
        rare = f"(n %% {RARE_EVERY} = {rare_rows(rows)[0] % RARE_EVERY})"
        failed = f"(n %% 7 = 0 OR {rare})"
        target = f"CASE WHEN {rare} THEN '{RARE_TARGET}' ELSE {target} END"
        cursor.execute(
            f"""{cte}
            INSERT INTO audit_call (call_id, "group", session, stream, outcome, served_by,
                error_code, http_status, started_at, elapsed_ms, ttft_ms, overhead_ms,
                prompt_tokens, completion_tokens, total_tokens, attempt_count, key_id,
                key_name, front_door, served_by_fallback)
            SELECT 'call-' || {text}, {groups}, 'sess-' || CAST(n %% 1000 AS TEXT), {failed},
                CASE WHEN {failed} THEN 'failed' ELSE 'ok' END,
                CASE WHEN {failed} THEN '' ELSE {target} END,
                CASE WHEN {failed} THEN 'ROUTES_EXHAUSTED' ELSE '' END,
                CASE WHEN {failed} THEN 502 ELSE 200 END,
                {seconds}, 120.5, 80.25, 1.25, 10, 20, 30, 1, 1 + n %% 50,
                'key-' || CAST(1 + n %% 50 AS TEXT),
                CASE WHEN n %% 10 = 0 THEN 'messages' ELSE 'chat' END, (n %% 11 = 0)
            FROM s""",
            [rows],
        )
        cursor.execute(
            f"""{cte}
            INSERT INTO audit_attempt (call_id, "index", target, try_number, ok, code, status,
                message, reason, elapsed_ms, will_retry, switched, switched_to, probe, rewrites,
                upstream_kind)
            SELECT 'call-' || {text}, 1, {target}, 1, NOT {failed},
                CASE WHEN {rare} THEN '{RARE_CODE}' WHEN {failed} THEN 'SERVER' ELSE '' END,
                NULL, '', '', 100.0,
                {failed}, {failed}, '', {failed} AND n %% 2 = 0, '',
                CASE WHEN n %% 10 = 0 THEN 'anthropic' ELSE 'openai' END
            FROM s""",
            [rows],
        )
        cursor.execute("ANALYZE")


def filters_to_check() -> Iterator[tuple[str, object, str]]:
    """(label, filters, the index its plan must name). ``code`` and ``target`` walk the
    calls in id order (the primary key) and check each call's attempts by their
    ``call_id`` index, stopping after a page of matches."""
    from routing.audit.call_query import CallFilters

    yield "newest (no filter)", CallFilters(), "PRIMARY|pkey|SCAN audit_call"
    yield "group", CallFilters(group="coding"), "audit_call_group_"
    yield "key", CallFilters(key_id=17), "audit_call_key_id_idx"
    yield "outcome", CallFilters(outcome="failed"), "audit_call_outcome_id_idx"
    yield "code", CallFilters(code="ROUTES_EXHAUSTED"), "audit_attempt_call_id"
    yield "session", CallFilters(session="sess-42"), "audit_call_session_id_idx"
    yield "front door", CallFilters(front_door="messages"), "audit_call_door_id_idx"
    # A yes/no column: after ANALYZE, SQLite judges its index unselective and walks the id
    # order instead (fine while fallbacks are common; PostgreSQL's statistics pick the
    # index when they are rare).
    yield (
        "served by fallback",
        CallFilters(fallback=True),
        "audit_call_fallback_id_idx|PRIMARY KEY|SCAN audit_call$",
    )
    yield (
        "key + outcome",
        CallFilters(key_id=17, outcome="failed"),
        "audit_call_key_id_idx|audit_call_outcome_id_idx",
    )
    since = BASE + timedelta(hours=14)
    yield (
        "time range (10 min)",
        CallFilters(since=since, until=since + timedelta(minutes=10)),
        "audit_call_started_at",
    )
    yield "target", CallFilters(target="p3/c"), "audit_attempt_call_id"
    # A rare value: PostgreSQL's statistics may start from the attempts' own index on the
    # value and fetch the few calls by call_id, which is the better plan for it.
    yield (
        "code (1 call in 100,000)",
        CallFilters(code=RARE_CODE),
        "audit_attempt_call_id|audit_attempt_code|audit_call_code_id_idx",
    )
    yield (
        "target (1 call in 100,000)",
        CallFilters(target=RARE_TARGET),
        "audit_attempt_call_id|audit_attempt_target",
    )


def _explain(query: QuerySet[Any, Any]) -> str:
    from django.db import connection

    if connection.vendor == "postgresql":
        # A tiny test table makes a sequential scan cheapest; forbid it to ask whether an
        # index *can* serve the query (on a big table the planner picks it by itself).
        with connection.cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
        try:
            return query.explain()
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET enable_seqscan = on")
    return query.explain()


def _uses_index(plan: str, expected: str) -> bool:
    """The plan names the expected index and never scans a whole table unordered
    (SQLite's bare ``SCAN audit_call`` walks the rowid = id backwards: the keyset order
    itself, stopping after a page; it is accepted only where ``expected`` says so)."""
    if "Seq Scan" in plan or re.search(r"SCAN audit_attempt(?! USING)", plan):
        return False
    # PostgreSQL may walk the primary key backwards with the filter applied, stopping
    # after a page: the keyset order itself, chosen when the value is common.
    return (
        re.search(expected + r"|Index Scan Backward using audit_call_pkey", plan, re.M) is not None
    )


def page_plans(*, before: int | None = None, repeat: int = 5) -> list[Plan]:
    from routing.audit.call_query import PAGE_SIZE, page_query

    plans = []
    for name, filters, expected in filters_to_check():
        query = page_query(filters, before=before, limit=PAGE_SIZE)  # type: ignore[arg-type]
        plan = _explain(query)
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            list(query.all())
            timings.append((time.perf_counter() - started) * 1000)
        plans.append(Plan(name, plan, _uses_index(plan, expected), statistics.median(timings)))
    return plans


def key_usage_plan(*, repeat: int = 5) -> Plan:
    """The keys page's read: calls and last use per key (``routing.audit.selectors``)."""
    from routing.audit.selectors import key_usage, key_usage_query

    plan = _explain(key_usage_query())
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        key_usage()
        timings.append((time.perf_counter() - started) * 1000)
    return Plan(
        "keys page: key_usage()", plan, _key_usage_indexed(plan), statistics.median(timings)
    )


def _key_usage_indexed(plan: str) -> bool:
    """The grouped read walks the ``(key_id, id)`` index without fetching call rows (SQLite
    names the covering index; PostgreSQL's choice between an index-only and a bitmap scan
    depends on its visibility map, so there the index is enough)."""
    if "Seq Scan" in plan:
        return False
    if "USING INDEX" in plan or "USING COVERING INDEX" in plan:  # SQLite
        return "USING COVERING INDEX audit_call_key_id_idx" in plan
    return "audit_call_key_id_idx" in plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="switchyard-plan-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{scratch}/plan.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "router_project.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from routing.audit.models import Call

    if Call.objects.exists():
        print("the scratch database already has calls; point DATABASE_URL at an empty one")
        return 2
    started = time.perf_counter()
    generate(args.rows)
    print(
        f"{connection.vendor}: generated {args.rows:,} calls + attempts in "
        f"{time.perf_counter() - started:.1f} s"
    )
    middle = Call.objects.order_by("-id").values_list("id", flat=True)[args.rows // 2]
    ok = True
    for label, before in (("first page", None), (f"deep page (before={middle})", middle)):
        print(f"\n## {label}\n")
        print("| filter | uses an index | median ms | plan |")
        print("|---|---|---:|---|")
        for plan in page_plans(before=before):
            ok &= plan.uses_index
            flat = " / ".join(line.strip() for line in plan.plan.splitlines() if line.strip())
            print(
                f"| {plan.name} | {'yes' if plan.uses_index else 'NO'} | {plan.ms:.1f} | `{flat}` |"
            )
    usage = key_usage_plan()
    ok &= usage.uses_index
    flat = " / ".join(line.strip() for line in usage.plan.splitlines() if line.strip())
    print(f"\n## {usage.name} (every render of the keys page)\n")
    print(f"{'index' if usage.uses_index else 'NO index'}, median {usage.ms:.1f} ms: `{flat}`")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
