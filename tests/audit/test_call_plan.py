"""The calls page's and the keys page's queries use the ledger's indexes (the plans
``bench.calls_plan`` prints for 1,000,000 rows; here on generated rows in the test
database)."""

from __future__ import annotations

import pytest

from bench.calls_plan import (
    RARE_CODE,
    RARE_TARGET,
    generate,
    key_usage_plan,
    page_plans,
    rare_rows,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_filter_of_the_calls_page_reads_through_an_index() -> None:
    from routing.audit.models import Attempt, Call

    generate(20_000)
    assert Call.objects.count() == 20_000 and Attempt.objects.count() == 20_000
    middle = Call.objects.order_by("-id").values_list("id", flat=True)[10_000]
    for before in (None, middle):
        plans = page_plans(before=before, repeat=1)
        assert len(plans) == 13
        bad = [(p.name, p.plan) for p in plans if not p.uses_index]
        assert bad == [], bad


def test_the_rare_code_and_target_are_in_the_generated_ledger() -> None:
    from routing.audit.call_query import CallFilters, filtered

    generate(25_000)  # small, yet with its rare call
    rare = [f"call-{n}" for n in rare_rows(25_000)]
    assert len(rare) == 1
    by_code = filtered(CallFilters(code=RARE_CODE)).values_list("call_id", flat=True)
    by_target = filtered(CallFilters(target=RARE_TARGET)).values_list("call_id", flat=True)
    assert list(by_code) == list(by_target) == rare
    assert rare_rows(1_000_000) == [50_000 + k * 100_000 for k in range(10)]  # 1 in 100,000


def test_key_usage_reads_only_the_key_index_and_agrees_with_the_ledger() -> None:
    from django.db.models import Count, Max

    from routing.audit.models import Call
    from routing.audit.selectors import key_usage

    generate(20_000)
    plan = key_usage_plan(repeat=1)
    assert plan.uses_index, plan.plan  # no call row fetched: COUNT and MAX(id) from the index
    # Generated calls start in id order, so "newest recorded" is also "latest started".
    slow = (
        Call.objects.filter(key_id__isnull=False)
        .order_by()
        .values("key_id")
        .annotate(calls=Count("id"), last=Max("started_at"))
    )
    expected = {row["key_id"]: (row["calls"], row["last"]) for row in slow}
    assert len(expected) == 50
    assert key_usage() == expected


def test_the_plan_check_refuses_a_full_scan() -> None:
    from bench.calls_plan import _key_usage_indexed, _uses_index

    # key_usage(): the index alone (SQLite says "covering"), never the call rows
    assert not _key_usage_indexed(
        "SEARCH audit_call USING INDEX audit_call_key_id_idx (key_id>?)"
    )  # the old MAX(started_at): every call row fetched through the index
    assert _key_usage_indexed(
        "SEARCH audit_call USING COVERING INDEX audit_call_key_id_idx (key_id>?)"
    )
    assert not _key_usage_indexed("Seq Scan on audit_call")
    assert _key_usage_indexed("Index Only Scan using audit_call_key_id_idx on audit_call")

    assert not _uses_index("Seq Scan on audit_call", "audit_call_key_id_idx")
    assert not _uses_index("SCAN audit_attempt", "audit_attempt_call_id")
    assert not _uses_index(
        "SEARCH audit_call USING INDEX audit_call_group_x", "audit_call_key_id_idx"
    )
    assert _uses_index(
        "SEARCH audit_call USING INDEX audit_call_key_id_idx (key_id=?)", "audit_call_key_id_idx"
    )
