"""The Django admin as the audit console: read-only pages for staff, nothing for
anonymous users, and no way to add, change or delete a record."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client

from routing.audit import services
from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition
from routing.simulator.script import Fail
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit

MODELS: list[type[Model]] = [Call, Attempt, Fallback, HealthTransition, ConfigChange]


@pytest.fixture
def records(audit: Audit) -> Audit:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    services.config_change_record(
        actor="user:alice",
        path="page",
        object_type="group",
        object_name="auto",
        before={"retry": {"max_retries": 5}},
        after={"retry": {"max_retries": 2}},
    )
    audit.flush()
    assert all(model._default_manager.exists() for model in MODELS)
    return audit


def url(model: type[Model], suffix: str = "") -> str:
    return f"/admin/audit/{model._meta.model_name}/{suffix}"


@pytest.fixture
def staff_viewer(records: Audit) -> Client:
    """A staff user (not a superuser) allowed to view the audit models."""
    user = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="audit", codename__startswith="view_")
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_staff_see_lists_and_details(staff_viewer: Client, model: type[Model]) -> None:
    listing = staff_viewer.get(url(model))
    assert listing.status_code == 200
    detail = staff_viewer.get(url(model, f"{model._default_manager.first().pk}/change/"))
    assert detail.status_code == 200
    html = detail.content.decode()
    assert 'name="_save"' not in html and "Delete" not in html


@pytest.mark.parametrize(
    ("model", "field", "match", "miss"),
    [
        (Call, "group", "auto", "nope"),
        (Call, "outcome__exact", "ok", "aborted"),
        (Call, "served_by", "p2/b", "p1/a"),
        (Call, "error_code", "", "SERVER"),
        (Call, "started_at__gte", "2000-01-01 00:00:00+00:00", "2100-01-01 00:00:00+00:00"),
        (Attempt, "target", "p1/a", "p9/z"),
        (Attempt, "code", "SERVER", "AUTH"),
        (Fallback, "group", "auto", "other"),
        (Fallback, "code", "SERVER", "AUTH"),
        (Fallback, "from_target", "p1/a", "p2/b"),
        (Fallback, "at__gte", "2000-01-01 00:00:00+00:00", "2100-01-01 00:00:00+00:00"),
        (HealthTransition, "target", "p1/a", "p2/b"),
        (HealthTransition, "code", "SERVER", "AUTH"),
        (ConfigChange, "path__exact", "page", "admin"),
    ],
)
def test_filters_narrow_the_lists(
    records: Audit, admin_client: Client, model: type[Model], field: str, match: str, miss: str
) -> None:
    page = admin_client.get(url(model), {field: match})
    assert page.status_code == 200
    assert page.context["cl"].result_count >= 1
    assert admin_client.get(url(model), {field: miss}).context["cl"].result_count == 0


def test_search_by_call_id(records: Audit, admin_client: Client) -> None:
    call = Call.objects.get()
    for model in (Call, Attempt, Fallback):
        page = admin_client.get(url(model), {"q": call.call_id})
        assert page.context["cl"].result_count >= 1, model
        page = admin_client.get(url(model), {"q": "0" * 32})
        assert page.context["cl"].result_count == 0, model


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_anonymous_users_are_sent_to_the_login_page(records: Audit, model: type[Model]) -> None:
    anonymous = Client()
    for path in (url(model), url(model, f"{model._default_manager.first().pk}/change/")):
        page = anonymous.get(path)
        assert page.status_code == 302 and "/admin/login/" in page["location"]


def test_a_user_who_is_not_staff_is_refused(records: Audit) -> None:
    user = User.objects.create_user("plain", password="pw-plain-1234")
    client = Client()
    client.force_login(user)
    page = client.get(url(Call))
    assert page.status_code == 302 and "/admin/login/" in page["location"]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_records_cannot_be_added_changed_or_deleted(
    records: Audit, admin_client: Client, model: type[Model]
) -> None:
    row = model._default_manager.first()
    before = {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}
    change = url(model, f"{row.pk}/change/")
    assert (
        admin_client.post(change, {f: "tampered" for f in before if f != "id"}).status_code == 403
    )
    assert admin_client.post(url(model, f"{row.pk}/delete/"), {"post": "yes"}).status_code == 403
    assert admin_client.get(url(model, "add/")).status_code == 403
    assert admin_client.post(
        url(model), {"action": "delete_selected", "_selected_action": [row.pk]}
    ).status_code in (200, 302)
    row.refresh_from_db()
    assert {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields} == before
    assert model._default_manager.filter(pk=row.pk).exists()


def test_a_call_page_shows_its_attempts_inline(records: Audit, admin_client: Client) -> None:
    call = Call.objects.get()
    html = admin_client.get(url(Call, f"{call.pk}/change/")).content.decode()
    assert "Attempts" in html
    assert html.count("SERVER") >= 3


def test_a_config_change_page_shows_the_diff(records: Audit, admin_client: Client) -> None:
    change = ConfigChange.objects.get(path="page")
    html = admin_client.get(url(ConfigChange, f"{change.pk}/change/")).content.decode()
    assert "retry.max_retries" in html and "user:alice" in html


def test_the_admin_is_branded_and_shows_durations_dates_and_zones(
    records: Audit, admin_client: Client
) -> None:
    import re

    call = Call.objects.get()
    listing = admin_client.get(url(Call)).content.decode()
    assert "Switchyard audit and configuration" in listing
    # date, seconds and zone, e.g. 2026-12-01 20:41:07 UTC
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", listing)
    assert re.search(r">\d+(\.\d\d)? (ms|s)<", listing)  # a formatted duration, no raw float
    assert f">{call.elapsed_ms}<" not in listing
    detail = admin_client.get(url(Call, f"{call.pk}/change/")).content.decode()
    assert "Time to first token" in detail and "Gateway overhead" in detail


@pytest.mark.parametrize(
    ("field", "match", "miss"),
    [
        ("served_by_fallback__exact", "1", "0"),
        ("key_name", "test", "nobody"),
        ("front_door__exact", "chat", "messages"),
    ],
)
def test_console_fields_filter_the_admin_list(
    records: Audit, admin_client: Client, field: str, match: str, miss: str
) -> None:
    assert admin_client.get(url(Call), {field: match}).context["cl"].result_count == 1
    assert admin_client.get(url(Call), {field: miss}).context["cl"].result_count == 0
