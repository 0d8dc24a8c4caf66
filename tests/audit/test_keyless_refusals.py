"""Requests without a valid key are counted, not each written to the ledger (SPEC §9):
anyone can send them, and with the ledger capped each row would push real history out.
At most one per client address and minute goes on the record (the runtime's clock), the
sampler's memory is bounded whatever the number of addresses, and a refusal with a valid
key stays on the record as before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.test import Client

from routing.audit.models import Call
from routing.engine.refusals import KeylessRefusals
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit, clear_audit_tables
from tests.audit.test_api import FakeClock
from tests.audit.test_metrics import scrape, value


@pytest.fixture
def clock(audit: Audit) -> Iterator[FakeClock]:
    runtime = audit.h.runtime
    original = runtime.clock  # type: ignore[attr-defined]
    runtime.clock = fake = FakeClock(1_700_000_000.0)  # type: ignore[attr-defined]
    runtime.keyless = KeylessRefusals()  # type: ignore[attr-defined]
    yield fake
    runtime.clock = original  # type: ignore[attr-defined]


def _post(url: str, headers: dict[str, str], model: str = "auto") -> int:
    body = {"model": model, "messages": MESSAGES}
    return httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=30).status_code


def test_fifty_refusals_without_a_key_are_counted_and_one_is_recorded(
    audit: Audit, clock: FakeClock
) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.flush()
    clear_audit_tables()
    url = audit.h.gateway.base_url
    before = scrape(audit)
    statuses = {_post(url, {}) for _ in range(25)}
    statuses |= {_post(url, {"authorization": "Bearer sk-not-a-key"}) for _ in range(25)}
    assert statuses == {401}
    audit.flush()
    [row] = Call.objects.all()
    assert (row.outcome, row.http_status, row.error_code) == ("refused", 401, "missing_api_key")

    clock.now += 60  # the next minute: one more sample
    assert _post(url, {}) == 401
    audit.flush()
    assert Call.objects.count() == 2

    after = scrape(audit)
    name = "switchyard_unauthenticated_refusals_total"
    assert value(after, name, outcome="recorded") - value(before, name, outcome="recorded") == 2
    assert value(after, name, outcome="counted") - value(before, name, outcome="counted") == 49
    status = audit.api.get("/api/v1/status").json()
    assert status["unauthenticated_refusals"] == 51


def test_refusals_with_a_valid_key_stay_on_the_record(audit: Audit, clock: FakeClock) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.flush()
    clear_audit_tables()
    headers = {"authorization": f"Bearer {audit.h.key}"}
    statuses = [_post(audit.h.gateway.base_url, headers, model="nope") for _ in range(5)]
    assert statuses == [404] * 5
    audit.flush()
    assert Call.objects.filter(outcome="refused", error_code="model_not_found").count() == 5
    assert audit.h.runtime.keyless.count == 0  # type: ignore[attr-defined]


def test_the_calls_page_shows_the_count(audit: Audit, clock: FakeClock) -> None:
    from django.contrib.auth.models import User

    for _ in range(3):
        assert _post(audit.h.gateway.base_url, {}) == 401
    staff = User.objects.create_user("operator", password="x" * 12, is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get("/calls/")
    assert page.status_code == 200
    assert b"data-keyless>3 requests without a valid key" in page.content


def test_one_sample_per_source_and_minute_in_bounded_memory() -> None:
    refusals = KeylessRefusals(limit=4)
    now = 1_700_000_000.0 - 1_700_000_000.0 % 60
    assert [refusals.record("10.0.0.1", now + s) for s in (0, 1, 59)] == [True, False, False]
    # Many addresses in one minute: samples stop at the limit, memory with them.
    sampled = [refusals.record(f"10.1.{n // 256}.{n % 256}", now + 30) for n in range(10_000)]
    assert sum(sampled) == 3 and len(refusals._sources) == 4
    assert refusals.record("10.0.0.1", now + 60)  # a new minute: sampled again
    assert (refusals.count, refusals.sampled) == (10_004, 5)
