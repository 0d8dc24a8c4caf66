"""The calls page's queries use the ledger's indexes (the plans ``bench.calls_plan``
prints for 1,000,000 rows; here on generated rows in the test database)."""

from __future__ import annotations

import pytest

from bench.calls_plan import (
    RARE_CODE,
    RARE_TARGET,
    generate,
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


def test_the_plan_check_refuses_a_full_scan() -> None:
    from bench.calls_plan import _uses_index

    assert not _uses_index("Seq Scan on audit_call", "audit_call_key_id_idx")
    assert not _uses_index("SCAN audit_attempt", "audit_attempt_call_id")
    assert not _uses_index(
        "SEARCH audit_call USING INDEX audit_call_group_x", "audit_call_key_id_idx"
    )
    assert _uses_index(
        "SEARCH audit_call USING INDEX audit_call_key_id_idx (key_id=?)", "audit_call_key_id_idx"
    )
