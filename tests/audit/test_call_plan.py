"""The calls page's queries use the ledger's indexes (the plans ``bench.calls_plan``
prints for 1,000,000 rows; here on generated rows in the test database)."""

from __future__ import annotations

import pytest

from bench.calls_plan import generate, page_plans

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_filter_of_the_calls_page_reads_through_an_index() -> None:
    from routing.audit.models import Attempt, Call

    generate(20_000)
    assert Call.objects.count() == 20_000 and Attempt.objects.count() == 20_000
    middle = Call.objects.order_by("-id").values_list("id", flat=True)[10_000]
    for before in (None, middle):
        plans = page_plans(before=before, repeat=1)
        assert len(plans) == 11
        bad = [(p.name, p.plan) for p in plans if not p.uses_index]
        assert bad == [], bad


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
