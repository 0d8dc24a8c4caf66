"""The operator's console through Django's test client, against the live gateway: the calls
page (filters, keyset pages, bad input), a call's detail, keys and groups created and
removed on the page (through the services, recorded), "test this target", live stats."""

from __future__ import annotations

import re
from collections.abc import Iterator

import openai
import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing.audit.models import Call, ConfigChange
from routing.models import ApiKey, Group
from routing.simulator.script import Fail, Reply
from tests.audit.conftest import RETRY_TWICE, clear_audit_tables
from tests.conftest import Harness
from tests.dashboard.conftest import PASSWORD

MESSAGES = [{"role": "user", "content": "hi"}]
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def console(harness: Harness) -> Iterator[tuple[Harness, Client]]:
    from routing.audit import writer

    writer.flush(10)
    clear_audit_tables()
    writer.attach(harness.runtime.hub)  # type: ignore[attr-defined]
    harness.configure(
        RETRY_TWICE.replace("    kind: openai\n", "    kind: openai\n    models: [a, b]\n")
    )
    client = Client()
    client.force_login(User.objects.create_user("operator", password=PASSWORD, is_staff=True))
    yield harness, client
    writer.flush(10)


def flush() -> None:
    from routing.audit import writer

    assert writer.flush(10)


def test_the_calls_page_filters_and_pages_by_keyset(console: tuple[Harness, Client]) -> None:
    h, client = console
    for _ in range(3):
        h.client().chat.completions.create(model="other", messages=MESSAGES)
    h.upstream.script("b", *[Fail(500)] * 6)
    with pytest.raises(openai.APIStatusError):
        h.client().chat.completions.create(model="other", messages=MESSAGES)
    flush()
    key = ApiKey.objects.get(name="test")
    page = client.get("/calls/", {"key": key.pk, "outcome": "failed"})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count("data-call-id=") == 1 and "ROUTES_EXHAUSTED" in html
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", html)  # date, seconds, zone
    assert 'data-live-query="key=' in html  # the first page appends live

    from dashboard.views import calls as calls_view

    ids = list(Call.objects.order_by("-id").values_list("call_id", flat=True))
    monkey_size = 2
    original = calls_view.calls_page

    async def small_pages(filters, *, before=None, limit=50):  # type: ignore[no-untyped-def]
        return await original(filters, before=before, limit=monkey_size)

    calls_view.calls_page = small_pages  # type: ignore[assignment]
    try:
        first = client.get("/calls/").content.decode()
        assert re.findall(r'<tr data-call-id="(\w+)"', first) == ids[:2]
        older = re.search(r'data-older href="\?before=(\d+)"', first)
        assert older is not None
        second = client.get("/calls/", {"before": older.group(1)}).content.decode()
        assert re.findall(r'<tr data-call-id="(\w+)"', second) == ids[2:4]
        assert "data-live-query" not in second  # older pages do not append live
    finally:
        calls_view.calls_page = original  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"outcome": "maybe"}, "outcome"),
        ({"key": "abc"}, "key"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-01T14:10", "until": "2026-12-01T14:00"}, "until"),
        ({"front_door": "fax"}, "front_door"),
        ({"fallback": "maybe"}, "fallback"),
    ],
)
def test_bad_filters_show_field_errors_and_list_nothing(
    console: tuple[Harness, Client], params: dict[str, str], field: str
) -> None:
    h, client = console
    h.client().chat.completions.create(model="other", messages=MESSAGES)
    flush()
    page = client.get("/calls/", params)
    assert page.status_code == 422
    html = page.content.decode()
    assert f'data-error-for="{field}"' in html and "data-rejected" in html
    assert "data-call-id=" not in html


def test_a_calls_detail_shows_attempts_timings_tokens_and_the_fallback_mark(
    console: tuple[Harness, Client],
) -> None:
    h, client = console
    h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    raw = h.client().chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    flush()
    call_id = raw.headers["x-switchyard-request-id"]
    html = client.get(f"/calls/{call_id}/").content.decode()
    assert "data-fallback-mark" in html and "served by fallback" in html
    assert html.count('data-attempt="') == 4
    assert "retried in place" in html and "switched to <code>p2/b</code>" in html
    assert re.search(r'data-timing="ttft">\d', html) and re.search(
        r'data-timing="overhead">\d', html
    )
    assert re.search(r"data-tokens>\d+ prompt \+ \d+ completion = \d+", html)
    assert "upstream-key" not in html
    assert client.get("/calls/nope/").status_code == 404


def test_keys_are_created_once_scoped_and_revoked_on_the_page(
    console: tuple[Harness, Client],
) -> None:
    h, client = console
    created = client.post("/keys/create/", {"name": "agents", "groups": ["other"]}, **HTMX)
    assert created.status_code == 200
    secret = re.search(r"<code data-secret>(sk-sy-[\w-]+)</code>", created.content.decode())
    assert secret is not None
    key = ApiKey.objects.get(name="agents")
    assert key.groups == ["other"] and key.hashed != secret.group(1)
    record = ConfigChange.objects.filter(object_type="key", path="page")
    flush()
    assert record.count() == 1 and record.get().actor == "user:operator"
    assert secret.group(1) not in client.get("/keys/").content.decode()  # shown once only

    agent = openai.OpenAI(base_url=h.gateway.base_url, api_key=secret.group(1), max_retries=0)
    agent.chat.completions.create(model="other", messages=MESSAGES)
    with pytest.raises(openai.NotFoundError):  # scoped to "other": "auto" is not there for it
        agent.chat.completions.create(model="auto", messages=MESSAGES)
    flush()
    row = re.search(
        rf'data-key="{key.pk}".*?data-last-used>(.*?)</td>.*?data-calls>(.*?)</td>',
        client.get("/keys/").content.decode(),
        re.S,
    )
    assert row is not None
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row.group(1))
    assert ">2</a>" in row.group(2)  # the answered call and the refused one (SPEC §12)

    revoked = client.post(f"/keys/{key.pk}/revoke/", **HTMX).content.decode()
    assert "data-row-notice" in revoked and "Revoked" in revoked
    key.refresh_from_db()
    assert key.revoked_at is not None
    with pytest.raises(openai.AuthenticationError):
        agent.chat.completions.create(model="other", messages=MESSAGES)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ops", "kind": "root"}, "kind"),
        ({"name": "ops", "groups": ["nope"]}, "groups"),
        ({"name": "ops", "kind": "admin", "groups": ["auto"]}, "groups"),
    ],
)
def test_a_bad_key_form_shows_field_errors_and_creates_nothing(
    console: tuple[Harness, Client], data: dict[str, object], field: str
) -> None:
    _, client = console
    before = ApiKey.objects.count()
    response = client.post("/keys/create/", data, **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert f'data-error-for="{field}"' in html and "Nothing was changed" in html
    assert "data-secret" not in html
    assert ApiKey.objects.count() == before


def test_groups_are_created_and_deleted_on_the_page(console: tuple[Harness, Client]) -> None:
    h, client = console
    created = client.post("/groups/create/", {"name": "coding", "target": "p2/b"}, **HTMX)
    assert created.status_code == 200
    html = created.content.decode()
    assert "Created group coding" in html and 'hx-swap-oob="afterbegin:#group-cards"' in html
    assert 'data-group="coding"' in html
    reply = h.client().chat.completions.create(model="coding", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    group = Group.objects.get(name="coding")
    stale = client.post("/groups/coding/delete/", {"based_on": group.version + 5}, **HTMX)
    assert stale.status_code == 409 and Group.objects.filter(name="coding").exists()
    deleted = client.post("/groups/coding/delete/", {"based_on": group.version}, **HTMX)
    assert deleted.status_code == 200 and b"deleted" in deleted.content
    assert not Group.objects.filter(name="coding").exists()
    with pytest.raises(openai.NotFoundError):
        h.client().chat.completions.create(model="coding", messages=MESSAGES)
    flush()
    paths = set(ConfigChange.objects.filter(object_name="coding").values_list("path", flat=True))
    assert paths == {"page"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "", "target": "p2/b"}, "name"),
        ({"name": "bad name!", "target": "p2/b"}, "name"),
        ({"name": "auto", "target": "p2/b"}, "name"),  # exists
        ({"name": "fresh", "target": ""}, "target"),
        ({"name": "fresh", "target": "p9/zz"}, "target"),
        ({"name": "fresh", "target": "p2/not-listed"}, "target"),
    ],
)
def test_a_bad_group_form_shows_field_errors_and_creates_nothing(
    console: tuple[Harness, Client], data: dict[str, str], field: str
) -> None:
    _, client = console
    before = sorted(Group.objects.values_list("name", "version"))
    response = client.post("/groups/create/", data, **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert f'data-error-for="{field}"' in html and "Nothing was changed" in html
    assert sorted(Group.objects.values_list("name", "version")) == before


def test_test_this_target_sends_one_cheap_request(console: tuple[Harness, Client]) -> None:
    h, client = console
    group = Group.objects.get(name="auto")
    target = group.targets.get(model="a")
    h.upstream.script("a", Reply("pong"))
    ok = client.post(f"/groups/auto/targets/{target.pk}/test/", **HTMX).content.decode()
    assert re.search(r"✓ answered in \d+ ms", ok)
    h.upstream.script("a", Fail(503, "overloaded"))
    failed = client.post(f"/groups/auto/targets/{target.pk}/test/", **HTMX).content.decode()
    assert "✕ HTTP 503" in failed and "upstream-key" not in failed
    assert not list(h.runtime.hub.recent)  # type: ignore[attr-defined]  # no health charged


def test_live_statistics_mark_a_failing_target_degraded_without_querying(
    console: tuple[Harness, Client],
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    h, client = console
    for _ in range(2):  # p1/a fails twice then answers: retried into a success every time
        h.upstream.script("a", Fail(503), Fail(503), Reply("ok"))
        h.client().chat.completions.create(model="auto", messages=MESSAGES)
    with CaptureQueriesContext(connection) as queries:
        stats = client.get("/stats/", {"key": ["p1/a", "p2/b"]}).json()["stats"]
    # only the staff gate's session and user lookups: no call table, no configuration
    assert all("audit_" not in q["sql"] and "routing_" not in q["sql"] for q in queries)
    assert len(queries) <= 2
    assert "data-degraded" in stats["p1/a"] and "data-degraded" not in stats["p2/b"]
    assert 'data-success="5">33 %' in stats["p1/a"] and 'data-attempts="5">6' in stats["p1/a"]
    assert "<svg" in stats["p1/a"]
    page = client.get("/groups/").content.decode()
    assert "data-degraded" in page and "badge-healthy" in page  # degraded while healthy
