"""One configuration write -> one version bump -> one notice (issue 23 item 2), on every
path: the services, the config file and the Django admin (item 1: its provider and
global-settings saves go through the same services).

A write saves several rows (a group and its targets, a claimed version and the object)
and records itself; each of those used to bump ``ConfigVersion`` and broadcast. Counted
here on the real paths: the version row in the database, and the notices this process
publishes on the shared Redis (read up to a sentinel published after the write, so the
count needs no waiting for silence).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client, override_settings

from routing import services
from routing.audit import writer
from routing.audit.models import ConfigChange
from routing.config.yaml import load_text
from routing.gateway import sync
from routing.models import ApiKey, ConfigVersion, GlobalSettings, Group, Provider
from routing.services.config_file import config_apply
from tests.state.servers import REDIS_URL
from tests.test_models import provider_form

pytestmark = pytest.mark.django_db(transaction=True)

DEADLINE_S = 10.0
ACTOR = {"actor": "test", "path": "api"}
FILE = """
providers:
  - {name: f1, base_url: "http://127.0.0.1:9/v1", models: [a, b]}
groups:
  - {name: fg, targets: [{provider: f1, model: a}, {provider: f1, model: b}]}
"""


def version() -> int:
    return ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0


@pytest.fixture
def notices() -> Iterator[Callable[[], int]]:
    """Counts this process's change notices published since the fixture started."""
    client = redis.Redis.from_url(REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(sync.CHANNEL)

    def count() -> int:
        sentinel = f"sentinel-{uuid.uuid4().hex}"
        client.publish(sync.CHANNEL, json.dumps({"origin": sentinel}))
        ours, deadline = 0, time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.5)
            if message is None:
                continue
            origin = sync._origin_of(message["data"])
            if origin == sentinel:
                return ours
            ours += origin == sync.PROCESS_ID
        raise AssertionError("the sentinel notice never arrived")

    with override_settings(SWITCHYARD={**settings.SWITCHYARD, "REDIS_URL": REDIS_URL}):
        count()  # drain what setting up published
        yield count
    pubsub.close()
    client.close()


def _provider() -> None:
    services.provider_create(
        data={"name": "p1", "base_url": "http://127.0.0.1:9/v1", "models": ["a", "b"]}, **ACTOR
    )


WRITES: dict[str, Callable[[], Any]] = {
    "provider_create": _provider,
    "group_create (a group and two targets)": lambda: services.group_create(
        data={
            "name": "g",
            "targets": [{"provider": "p1", "model": "a"}, {"provider": "p1", "model": "b"}],
        },
        **ACTOR,
    ),
    "provider_update (a claimed version, then the row)": lambda: services.provider_update(
        name="p1", data={"models": ["a", "b", "c"]}, based_on=1, **ACTOR
    ),
    "targets_reorder (update() only)": lambda: services.targets_reorder(
        group="g",
        order=[t.pk for t in Provider.objects.get(name="p1").targets.order_by("-position")],
        based_on=1,
        **ACTOR,
    ),
    "key_create": lambda: services.key_create(name="k", kind="client", **ACTOR),
    "loadconfig (a file of two objects)": lambda: config_apply(load_text(FILE), source="test.yaml"),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_one_write_bumps_the_version_once_and_broadcasts_once(
    write: str, notices: Callable[[], int]
) -> None:
    GlobalSettings.load()  # the singleton a first read creates (a write of its own, once)
    if write != "provider_create":
        _provider()
    if write.startswith("targets_reorder"):
        WRITES["group_create (a group and two targets)"]()
    notices()
    before = version()
    WRITES[write]()
    assert version() == before + 1
    assert notices() == 1


def test_a_rolled_back_savepoint_takes_its_bump_and_the_next_write_bumps(
    notices: Callable[[], int],
) -> None:
    before = version()
    with transaction.atomic():
        try:
            with transaction.atomic():
                _provider()
                raise RuntimeError("refused")
        except RuntimeError:
            pass
        assert version() == before  # the savepoint's bump went with it
        services.key_create(name="k", kind="client", **ACTOR)
    assert version() == before + 1
    assert notices() == 1


def test_a_write_that_changes_nothing_bumps_nothing(notices: Callable[[], int]) -> None:
    _provider()
    notices()
    before = version()
    services.provider_update(name="p1", data={}, based_on=1, **ACTOR)
    assert version() == before
    assert notices() == 0


def admin_records() -> list[tuple[str, str]]:
    """(actor, object type) of the config-change records the admin left, oldest first."""
    assert writer.flush(10)
    rows = ConfigChange.objects.filter(path="admin").order_by("id")
    return list(rows.values_list("actor", "object_type"))


def _admin() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-0123456789")
    client = Client()
    client.force_login(user)
    return client


def _global_form(policy: dict[str, Any]) -> dict[str, str]:
    based_on = str(GlobalSettings.load().version)
    return {"policy": json.dumps(policy), "based_on_version": based_on, "_save": "Save"}


def _provider_page() -> str:
    return f"/admin/routing/provider/{Provider.objects.get(name='p1').pk}/change/"


ADMIN_SAVES: dict[str, Callable[[Client], Any]] = {
    "add a provider": lambda admin: admin.post(
        "/admin/routing/provider/add/", provider_form(name="p2")
    ),
    "change a provider": lambda admin: admin.post(
        _provider_page(), provider_form(Provider.objects.get(name="p1"), models='["a"]')
    ),
    "change the global settings": lambda admin: admin.post(
        f"/admin/routing/globalsettings/{GlobalSettings.load().pk}/change/",
        _global_form({"switch_codes": ["SERVER"]}),
    ),
}


@pytest.mark.parametrize("save", list(ADMIN_SAVES))
def test_an_admin_save_bumps_the_version_once_and_announces_once(
    save: str, notices: Callable[[], int]
) -> None:
    GlobalSettings.load()
    _provider()  # p1 at version 1
    admin = _admin()
    notices()
    before = version()
    response = ADMIN_SAVES[save](admin)
    assert response.status_code == 302, response.content.decode()
    assert version() == before + 1
    assert notices() == 1
    recorded = {"add a provider": "provider", "change a provider": "provider"}
    assert admin_records() == [("admin:root", recorded.get(save, "global"))]
    # the row's own version moved once too (a new provider starts at 1)
    rows = {"p1": Provider.objects.get(name="p1").version, "global": GlobalSettings.load().version}
    expected = {
        "add a provider": {"p1": 1, "global": 1},
        "change a provider": {"p1": 2, "global": 1},
        "change the global settings": {"p1": 1, "global": 2},
    }
    assert rows == expected[save]


def test_an_admin_save_that_changes_nothing_bumps_nothing(notices: Callable[[], int]) -> None:
    GlobalSettings.load()
    _provider()
    admin = _admin()
    notices()
    before = version()
    unchanged = provider_form(Provider.objects.get(name="p1"), models='["a", "b"]')
    assert admin.post(_provider_page(), unchanged).status_code == 302
    assert (
        admin.post(
            f"/admin/routing/globalsettings/{GlobalSettings.load().pk}/change/", _global_form({})
        ).status_code
        == 302
    )
    assert version() == before
    assert notices() == 0
    assert Provider.objects.get(name="p1").version == GlobalSettings.load().version == 1


def _two_groups_and_a_spare_provider() -> None:
    GlobalSettings.load()
    _provider()
    services.provider_create(
        data={"name": "spare", "base_url": "http://127.0.0.1:9/v1", "models": ["a"]}, **ACTOR
    )
    for name in ("g1", "g2"):
        services.group_create(
            data={"name": name, "targets": [{"provider": "p1", "model": "a"}]}, **ACTOR
        )
    services.key_create(name="k", kind="client", **ACTOR)


def _selected(model: str, rows: Any) -> tuple[str, dict[str, Any]]:
    action = {"action": "delete_selected", "post": "yes"}
    return f"/admin/routing/{model}/", {**action, "_selected_action": [r.pk for r in rows]}


ADMIN_DELETES: dict[str, Callable[[Client], Any]] = {
    "a group on its page": lambda admin: admin.post(
        f"/admin/routing/group/{Group.objects.get(name='g1').pk}/delete/", {"post": "yes"}
    ),
    "two groups from the list": lambda admin: admin.post(
        *_selected("group", Group.objects.filter(name__in=["g1", "g2"]))
    ),
    "a provider on its page": lambda admin: admin.post(
        f"/admin/routing/provider/{Provider.objects.get(name='spare').pk}/delete/",
        {"post": "yes"},
    ),
    "a key from the list": lambda admin: admin.post(*_selected("apikey", ApiKey.objects.all())),
}
DELETED = {
    "a group on its page": [("group", "g1")],
    "two groups from the list": [("group", "g1"), ("group", "g2")],
    "a provider on its page": [("provider", "spare")],
    "a key from the list": [("key", "k")],
}


@pytest.mark.parametrize("delete", list(ADMIN_DELETES))
def test_an_admin_delete_goes_through_the_services_and_bumps_once(
    delete: str, notices: Callable[[], int]
) -> None:
    _two_groups_and_a_spare_provider()
    admin = _admin()
    notices()
    before = version()
    response = ADMIN_DELETES[delete](admin)
    assert response.status_code == 302, response.content.decode()
    assert version() == before + 1  # one admin action, one configuration write
    assert notices() == 1
    assert writer.flush(10)
    records = ConfigChange.objects.filter(path="admin").order_by("object_name")
    assert [(r.object_type, r.object_name.split(" (")[0]) for r in records] == DELETED[delete]
    assert all(r.actor == "admin:root" and r.after is None for r in records)
    assert all(r.before for r in records)  # what was deleted, as the services record it
    remaining = {
        "group": set(Group.objects.values_list("name", flat=True)),
        "provider": set(Provider.objects.values_list("name", flat=True)),
        "key": set(ApiKey.objects.values_list("name", flat=True)),
    }
    assert all(name not in remaining[kind] for kind, name in DELETED[delete])
