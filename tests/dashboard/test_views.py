"""The dashboard's pages and htmx endpoints through Django's test client."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy
from routing.models import Group, Provider
from tests.dashboard.conftest import PASSWORD

HTMX = {"HTTP_HX_REQUEST": "true"}
SECRET = "sk-live-VERY-secret-credential-4242"


def group_policy(name: str = "auto") -> tuple[dict[str, object], int]:
    group = Group.objects.get(name=name)
    return dict(group.policy), group.version


# ---------------------------------------------------------------------- access
def test_pages_redirect_anonymous_users_to_the_login_form(transactional_db: None) -> None:
    response = Client().get("/groups/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/groups/"


def test_htmx_requests_of_anonymous_users_get_401_and_a_redirect_header(
    transactional_db: None,
) -> None:
    response = Client().post("/groups/auto/targets/reorder/", {"order": "1,2"}, **HTMX)
    assert response.status_code == 401
    assert response["HX-Redirect"].startswith("/login/")


def test_logged_in_users_who_are_not_staff_are_refused(transactional_db: None) -> None:
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_user("visitor", password=PASSWORD))
    assert client.get("/groups/").status_code == 403


def test_the_login_form_admits_staff_and_refuses_others(
    transactional_db: None, fresh_runtime: object
) -> None:
    from django.contrib.auth.models import User

    User.objects.create_user("visitor", password=PASSWORD)
    User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    refused = Client().post("/login/", {"username": "visitor", "password": PASSWORD})
    assert refused.status_code == 200 and b"Wrong username or password" in refused.content
    client = Client()
    admitted = client.post(
        "/login/", {"username": "operator", "password": PASSWORD, "next": "/groups/"}
    )
    assert admitted.status_code == 302 and admitted["Location"] == "/groups/"
    assert client.get("/groups/").status_code == 200


# ---------------------------------------------------------------------- groups page
def test_groups_page_shows_targets_in_order_with_their_health(
    staff_client: Client, configure: Callable[..., None], fresh_runtime: object
) -> None:
    configure()
    store, now = fresh_runtime.store, fresh_runtime.clock()  # type: ignore[attr-defined]
    async_to_sync(store.record_failure)(
        "p1/a",
        Failure(FailureCode.RATE_LIMIT, "slow down", 429, retry_after_s=30.0),
        CircuitPolicy(),
        now,
        was_probe=False,
    )
    async_to_sync(store.disable_provider)("p2", Failure(FailureCode.AUTH, "bad key", 401), now)

    html = staff_client.get("/groups/").content.decode()

    card = html[html.index('data-group="auto"') : html.index('data-group="solo"')]
    assert card.index("<code>p1/a</code>") < card.index("<code>p2/b</code>")
    cooling = re.search(
        r'data-badge="p1/a"><span class="badge badge-cooling" data-until="([\d.]+)"', card
    )
    assert cooling is not None and float(cooling.group(1)) == pytest.approx(now + 30.0, abs=1.0)
    assert re.search(r"cooling <span data-countdown>(29|30) s</span>", card)
    assert 'data-badge="p2/b"' in card and "disabled: AUTH" in card
    assert "Re-enable p2" in card
    assert "No calls yet" in card
    assert SECRET not in html


def test_reorder_writes_the_new_order_and_answers_with_the_fresh_card(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    group = Group.objects.get(name="auto")
    first, second = group.targets.order_by("position")
    response = staff_client.post(
        "/groups/auto/targets/reorder/",
        {"order": f"{second.pk},{first.pk}", "based_on": group.version},
        **HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("<code>p2/b</code>") < html.index("<code>p1/a</code>")
    assert f'data-version="{group.version + 1}"' in html
    assert list(group.targets.order_by("position").values_list("model", flat=True)) == ["b", "a"]


def test_a_stale_target_action_changes_nothing_and_says_so(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    group = Group.objects.get(name="auto")
    first, second = group.targets.order_by("position")
    response = staff_client.post(
        "/groups/auto/targets/reorder/",
        {"order": f"{second.pk},{first.pk}", "based_on": group.version - 1},
        **HTMX,
    )
    assert response.status_code == 409
    assert b"changed in another window" in response.content
    assert list(group.targets.order_by("position").values_list("model", flat=True)) == ["a", "b"]
    assert Group.objects.get(name="auto").version == group.version


def test_add_target_offers_only_loaded_model_lists_with_nothing_preselected(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    Provider.objects.create(name="empty", base_url="http://127.0.0.1:9/v1")
    html = staff_client.get("/groups/").content.decode()
    card = html[html.index('data-group="solo"') :]
    provider_select = card[card.index('name="provider"') : card.index("</select>")]
    assert '<option value="" selected disabled>Select a provider</option>' in provider_select
    assert 'value="p1"' in provider_select and 'value="empty"' not in provider_select

    options = staff_client.get(
        "/groups/auto/targets/models/", {"provider": "p1"}, **HTMX
    ).content.decode()
    assert options.startswith('<option value="" selected disabled>Select a model</option>')
    assert '<option value="x">x</option>' in options
    assert '<option value="a" disabled>a (already in this group)</option>' in options

    version = Group.objects.get(name="auto").version
    response = staff_client.post(
        "/groups/auto/targets/add/",
        {"provider": "p1", "model": "x", "weight": "2", "based_on": version},
        **HTMX,
    )
    assert response.status_code == 200 and b"<code>p1/x</code>" in response.content
    assert (
        Group.objects.get(name="auto")
        .targets.filter(provider__name="p1", model="x", weight=2)
        .exists()
    )


def test_remove_enable_and_reset_targets(
    staff_client: Client, configure: Callable[..., None], fresh_runtime: object
) -> None:
    configure()
    group = Group.objects.get(name="auto")
    first, second = group.targets.order_by("position")
    off = staff_client.post(
        f"/groups/auto/targets/{first.pk}/enabled/",
        {"enabled": "0", "based_on": group.version},
        **HTMX,
    )
    assert off.status_code == 200 and b"not routed (disabled here)" in off.content
    first.refresh_from_db()
    assert first.enabled is False

    store = fresh_runtime.store  # type: ignore[attr-defined]
    async_to_sync(store.record_failure)(
        "p2/b",
        Failure(FailureCode.SERVER, "boom", 503),
        CircuitPolicy(),
        fresh_runtime.clock(),
        was_probe=False,  # type: ignore[attr-defined]
    )
    reset = staff_client.post(f"/groups/auto/targets/{second.pk}/reset/", **HTMX)
    assert reset.status_code == 200
    assert b'data-badge="p2/b"><span class="badge badge-healthy"' in reset.content

    version = Group.objects.get(name="auto").version
    removed = staff_client.post(
        f"/groups/auto/targets/{first.pk}/remove/", {"based_on": version}, **HTMX
    )
    assert removed.status_code == 200 and b"<code>p1/a</code>" not in removed.content
    last = staff_client.post(
        f"/groups/auto/targets/{second.pk}/remove/", {"based_on": version + 1}, **HTMX
    )
    assert last.status_code == 422 and b"a group needs at least one target" in last.content


# ---------------------------------------------------------------------- settings form
def field_block(html: str, name: str) -> str:
    start = html.index(f'data-field="{name}"')
    end = html.find('class="field', start)
    return html[start : end if end != -1 else None]


def test_settings_form_shows_effective_values_and_where_they_come_from(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    cooldown = field_block(html, "circuit.cooldown_base_ms")
    assert (
        'value="20000"' in cooldown
        and "data-overridden" in cooldown
        and "Restore default" in cooldown
    )
    retries = field_block(html, "retry.max_retries")
    assert 'value="5"' in retries and "inherited from built-in default" in retries
    assert "data-overridden" not in retries
    switch = field_block(html, "switch_codes")
    assert 'value="RATE_LIMIT" checked' in switch and 'value="BAD_REQUEST">' in switch

    global_html = staff_client.get("/settings/").content.decode()
    assert "inherited from config file" in field_block(global_html, "circuit.cooldown_base_ms")


def form_post(html: str, **changes: object) -> dict[str, object]:
    """What the browser would submit from the rendered form, with ``changes`` typed in."""
    data: dict[str, object] = {}
    for name, value in re.findall(
        r'<input type="number" name="([\w.]+)" id="[\w-]+" value="([^"]*)"', html
    ):
        data[name] = value
    for name, value in re.findall(
        r'<input type="checkbox" name="([\w.]+)" value="(\w+)" checked>', html
    ):
        data.setdefault(name, []).append(value)  # type: ignore[union-attr]
    for name, body in re.findall(r'<select name="([\w.]+)" id="[\w-]+">(.*?)</select>', html, re.S):
        data[name] = re.search(r'<option value="([^"]*)" selected>', body).group(1)  # type: ignore[union-attr]
    data["based_on"] = re.search(r'name="based_on" value="(\d+)"', html).group(1)  # type: ignore[union-attr]
    data.update({key.replace("__", "."): value for key, value in changes.items()})
    return data


def test_saving_writes_only_the_changed_field(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    before, version = group_policy()
    response = staff_client.post(
        "/groups/auto/settings/", form_post(html, retry__max_retries="2"), **HTMX
    )
    assert response.status_code == 200
    assert b"Saved max retries" in response.content
    policy, new_version = group_policy()
    assert policy == {**before, "retry.max_retries": 2}
    assert new_version == version + 1
    assert "data-overridden" in field_block(response.content.decode(), "retry.max_retries")

    from routing.audit.models import ConfigChange
    from routing.audit.writer import flush

    assert flush(5.0)
    change = ConfigChange.objects.get(path="page", object_name="auto")
    assert change.actor == "user:operator"
    assert change.diff == {"policy.retry.max_retries": {"before": None, "after": 2}}


def test_a_stale_save_changes_nothing_and_keeps_what_was_typed(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    stale = staff_client.get("/groups/auto/settings/").content.decode()
    staff_client.post("/groups/auto/settings/", form_post(stale, retry__max_retries="2"), **HTMX)
    before = group_policy()

    response = staff_client.post(
        "/groups/auto/settings/", form_post(stale, retry__max_retries="7"), **HTMX
    )

    assert response.status_code == 409
    html = response.content.decode()
    assert "Not saved: changed in another window — reload to see it." in html
    assert 'value="7"' in field_block(html, "retry.max_retries")
    assert group_policy() == before


def test_invalid_input_shows_field_errors_and_changes_nothing(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    before = group_policy()
    data = form_post(html, circuit__cooldown_base_ms="-5")
    data.pop("switch_codes")  # every box unchecked
    response = staff_client.post("/groups/auto/settings/", data, **HTMX)
    assert response.status_code == 422
    page = response.content.decode()
    assert "must list at least one failure code" in field_block(page, "switch_codes")
    assert "greater than or equal to 0" in field_block(page, "circuit.cooldown_base_ms")
    assert group_policy() == before


def test_restore_default_of_one_field_shows_the_inherited_value(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    data = form_post(html)
    data["field"] = "circuit.cooldown_base_ms"
    response = staff_client.post("/groups/auto/settings/restore/", data, **HTMX)
    assert response.status_code == 200
    cooldown = field_block(response.content.decode(), "circuit.cooldown_base_ms")
    assert 'value="15000"' in cooldown and "inherited from config file" in cooldown
    assert "data-overridden" not in cooldown
    assert "circuit.cooldown_base_ms" not in group_policy()[0]


def test_global_defaults_form_saves_to_the_global_layer(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    from routing.models import GlobalSettings

    configure()
    html = staff_client.get("/settings/").content.decode()
    response = staff_client.post("/settings/", form_post(html, retry__max_retries="4"), **HTMX)
    assert response.status_code == 200
    assert GlobalSettings.load().policy == {"retry.max_retries": 4}
    solo = staff_client.get("/groups/solo/settings/").content.decode()
    assert 'value="4"' in field_block(solo, "retry.max_retries")
    assert "inherited from global settings" in field_block(solo, "retry.max_retries")


# ---------------------------------------------------------------------- providers
def test_the_credential_is_write_only(staff_client: Client, configure: Callable[..., None]) -> None:
    configure()
    created = staff_client.post(
        "/providers/",
        {"name": "p3", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": SECRET},
        **HTMX,
    )
    assert created.status_code == 200
    provider = Provider.objects.get(name="p3")
    assert provider.get_api_key() == SECRET
    pages = [
        created.content.decode(),
        staff_client.get("/providers/").content.decode(),
        staff_client.get("/providers/p3/").content.decode(),
    ]
    for html in pages:
        assert SECRET not in html
        assert SECRET[:-4] not in html
    assert "set <code>…4242</code>" in pages[1]

    rejected = staff_client.post(
        "/providers/", {"name": "bad name!", "base_url": "nope", "api_key": SECRET}, **HTMX
    )
    assert rejected.status_code == 422
    assert SECRET not in rejected.content.decode()
    assert b"Enter the credential again" in rejected.content

    edited = staff_client.post(
        "/providers/p3/",
        {"base_url": "http://127.0.0.1:9/v2", "api_key": "", "based_on": provider.version},
        **HTMX,
    )
    assert edited.status_code == 200 and b"Saved." in edited.content
    provider.refresh_from_db()
    assert provider.base_url == "http://127.0.0.1:9/v2" and provider.get_api_key() == SECRET


def test_the_kind_select_offers_the_registrys_kinds_and_keeps_a_rejected_choice(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    from routing.protocols.registry import KIND_CHOICES

    configure()
    page = staff_client.get("/providers/").content.decode()
    options = re.findall(r'<option value="([^"]+)"( selected)?>([^<]+)</option>', page)
    kinds = [option for option in options if option[0] in dict(KIND_CHOICES)]
    assert [(value, label) for value, _, label in kinds] == KIND_CHOICES
    assert [value for value, selected, _ in kinds if selected] == ["openai"]
    rejected = staff_client.post(
        "/providers/", {"name": "bad name!", "kind": "anthropic", "base_url": "nope"}, **HTMX
    )
    assert rejected.status_code == 422
    assert '<option value="anthropic" selected>' in rejected.content.decode()


def test_the_health_check_interval_is_set_per_provider_on_the_page(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    base = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}
    created = staff_client.post(
        "/providers/", {"name": "p5", "health_check_s": "30", **base}, **HTMX
    )
    assert created.status_code == 200
    provider = Provider.objects.get(name="p5")
    assert provider.health_check_s == 30
    assert (
        'name="health_check_s" value="30.0"' in staff_client.get("/providers/p5/").content.decode()
    )
    for bad in ("-1", "abc", "0.5"):
        rejected = staff_client.post(
            "/providers/p5/", {**base, "health_check_s": bad, "based_on": provider.version}, **HTMX
        )
        assert rejected.status_code == 422, bad
        assert b'data-errors-for="health_check_s"' in rejected.content, bad
        provider.refresh_from_db()
        assert provider.health_check_s == 30, bad
    off = staff_client.post(
        "/providers/p5/", {**base, "health_check_s": "0", "based_on": provider.version}, **HTMX
    )
    assert off.status_code == 200
    provider.refresh_from_db()
    assert provider.health_check_s == 0
    default = staff_client.post(
        "/providers/p5/", {**base, "health_check_s": "", "based_on": provider.version}, **HTMX
    )
    assert default.status_code == 200
    provider.refresh_from_db()
    assert provider.health_check_s is None  # blank: the gateway's interval


def test_a_credential_no_request_can_carry_is_a_field_error_on_the_page(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    rejected = staff_client.post(
        "/providers/",
        {"name": "p4", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-clé"},
        **HTMX,
    )
    assert rejected.status_code == 422
    assert b"printable ASCII" in rejected.content
    assert not Provider.objects.filter(name="p4").exists()


def test_refresh_models_and_test_talk_to_the_upstream(
    staff_client: Client, configure: Callable[..., None], fake_upstream: object
) -> None:
    from routing.simulator.script import Reply

    fake_upstream.script("m1", Reply("pong"))  # type: ignore[attr-defined]
    configure(upstream=fake_upstream.base_url)  # type: ignore[attr-defined]
    Provider.objects.create(name="fresh", base_url=fake_upstream.base_url)  # type: ignore[attr-defined]

    refreshed = staff_client.post("/providers/fresh/refresh/", **HTMX)
    assert refreshed.status_code == 200 and b"Loaded 1 model." in refreshed.content
    assert Provider.objects.get(name="fresh").models == ["m1"]

    tested = staff_client.post("/providers/fresh/test/", **HTMX).content.decode()
    assert re.search(r"✓ test passed</span> in \d+ ms · HTTP 200", tested)

    Provider.objects.create(name="down", base_url="http://127.0.0.1:9/v1")
    failed = staff_client.post("/providers/down/refresh/", **HTMX).content.decode()
    assert "Could not load the model list: could not reach http://127.0.0.1:9/v1/models" in failed


def test_a_stored_unsendable_credential_is_a_clear_error_on_test_and_refresh(
    staff_client: Client,
) -> None:
    row = Provider(name="old", base_url="http://127.0.0.1:9/v1", models=["m1"])
    row.set_api_key("sk-clé-ünicode")  # a row written before validation refused it
    row.save()
    refreshed = staff_client.post("/providers/old/refresh/", **HTMX)
    assert refreshed.status_code == 200
    assert (
        "Could not load the model list: MISSING_CREDENTIAL: the provider&#x27;s credential "
        "is not printable ASCII" in refreshed.content.decode()
    )
    tested = staff_client.post("/providers/old/test/", **HTMX)
    assert tested.status_code == 200
    assert "credential is not printable ASCII" in tested.content.decode()


def test_restore_all_defaults_clears_every_override_of_the_group(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    html = staff_client.get("/groups/auto/settings/").content.decode()
    assert "data-restore-all" in html and "Restore all defaults" in html
    staff_client.post("/groups/auto/settings/", form_post(html, retry__max_retries="2"), **HTMX)
    policy, _ = group_policy()
    assert policy == {"circuit.cooldown_base_ms": 20000, "retry.max_retries": 2}
    fresh = staff_client.get("/groups/auto/settings/").content.decode()
    data = form_post(fresh)
    data["field"] = ""  # what the button sends (hx-vals): every field
    response = staff_client.post("/groups/auto/settings/restore/", data, **HTMX)
    assert response.status_code == 200
    assert group_policy()[0] == {}
    page = response.content.decode()
    assert "data-overridden" not in page
    assert "inherited from config file" in field_block(page, "circuit.cooldown_base_ms")
    assert 'value="5"' in field_block(page, "retry.max_retries")


def test_the_chain_panel_says_when_recent_calls_cannot_be_read(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    from django.db import connection

    from routing.audit.models import Call

    configure()
    table = Call._meta.db_table
    with connection.cursor() as cursor:  # the audit table is gone: a real read failure
        cursor.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_away"')
    try:
        response = staff_client.get("/groups/")
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER TABLE "{table}_away" RENAME TO "{table}"')
    assert response.status_code == 200  # the rest of the page still works
    html = response.content.decode()
    # sqlite says OperationalError, PostgreSQL ProgrammingError
    assert re.search(
        r'role="alert">Could not load recent calls: (OperationalError|ProgrammingError)', html
    )
    assert 'data-badge="p2/b"' in html
