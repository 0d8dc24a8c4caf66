"""Providers through the API: CRUD with a write-only credential, refresh-models and test
against a real loopback upstream, and re-enabling a credential-disabled provider."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from routing.config.errors import ConfigError
from routing.config.yaml import load_text
from routing.engine.failures import Failure, FailureCode
from routing.engine.health import EventKind, HealthEvent
from routing.models import Provider
from routing.simulator.script import Reply
from routing.simulator.server import FakeUpstream
from tests.api.conftest import Api

KEY = "sk-upstream-0123456789abcdef"


@pytest.fixture(scope="module")
def guarded() -> Iterator[FakeUpstream]:
    """An upstream that demands ``KEY`` and lists three models."""
    with FakeUpstream(api_key=KEY, models=["m-large", "m-small", "m-small"]) as server:
        yield server


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: connecting is refused


def test_create_read_and_list_never_show_the_credential(api: Api) -> None:
    created = api.provider(
        "p1", api_key=KEY, headers={"x-team": "ops"}, models=["a"], timeouts={"connect_s": 2}
    )
    assert created["api_key_set"] is True and created["api_key_hint"] == "…cdef"
    assert "api_key" not in created
    assert created["timeouts"] == {
        "connect_s": 2.0,
        "headers_s": 10.0,
        "first_token_s": 240.0,
        "idle_s": 60.0,
        "total_s": 600.0,
    }
    assert api.get("/providers/p1").json() == created
    assert api.get("/providers").json() == [created]
    assert Provider.objects.get().get_api_key() == KEY


def test_invalid_providers_are_field_level_422s(api: Api) -> None:
    api.provider("p1")
    cases: list[tuple[dict[str, Any], list[Any]]] = [
        ({"name": "bad name", "base_url": "http://x.test/v1"}, ["body", "name"]),
        ({"name": "p2", "base_url": "ftp://x.test"}, ["body", "base_url"]),
        (
            {"name": "p2", "base_url": "http://x.test", "headers": {"Authorization": "k"}},
            ["body", "headers"],
        ),
        (
            {"name": "p2", "base_url": "http://x.test", "timeouts": {"idle_s": 0}},
            ["body", "timeouts", "idle_s"],
        ),
        ({"name": "p2", "base_url": "http://x.test", "models": ["a", "a"]}, ["body", "models"]),
        # PostgreSQL cannot store a NUL: refused as a field error, not a 500 from the database
        (
            {"name": "p2", "base_url": "http://x.test", "models": ["a", "b\x00"]},
            ["body", "models", 1],
        ),
        ({"name": "p2", "base_url": "http://x.test", "apikey": "k"}, ["body", "apikey"]),
    ]
    for body, loc in cases:
        response = api.post("/providers", body)
        assert response.status_code == 422, body
        assert [e["loc"] for e in response.json()["detail"]] == [loc], response.json()
    assert Provider.objects.count() == 1


def test_a_taken_name_is_a_conflict_with_the_field_named(api: Api) -> None:
    """A valid body the state refuses: 409 (documented), in the 422's shape."""
    api.provider("p1")
    response = api.post("/providers", {"name": "p1", "base_url": "http://x.test/v1"})
    assert response.status_code == 409
    assert response.json()["detail"] == [
        {
            "loc": ["body", "name"],
            "msg": "a provider named 'p1' already exists",
            "type": "value_error",
        }
    ]
    assert Provider.objects.count() == 1


def test_update_merges_and_the_credential_is_write_only(api: Api) -> None:
    api.provider("p1", api_key=KEY, timeouts={"connect_s": 2, "total_s": 30})
    kept = api.patch(
        "/providers/p1",
        {"base_url": "http://127.0.0.1:10/v1", "api_key": "", "timeouts": {"idle_s": 9}},
        if_match='W/"1"',
    )
    assert kept.status_code == 200 and kept["ETag"] == 'W/"2"'
    assert kept.json()["timeouts"] == {
        "connect_s": 2.0,
        "headers_s": 10.0,
        "first_token_s": 240.0,
        "idle_s": 9.0,
        "total_s": 30.0,
    }
    assert Provider.objects.get().get_api_key() == KEY

    replaced = api.patch("/providers/p1", {"api_key": "sk-new-key-000000000000"}, if_match='W/"2"')
    assert replaced.json()["api_key_hint"] == "…0000" and replaced.json()["version"] == 3
    assert Provider.objects.get().get_api_key() == "sk-new-key-000000000000"

    cleared = api.patch("/providers/p1", {"api_key": None}, if_match='W/"3"')
    assert cleared.json()["api_key_set"] is False and cleared.json()["api_key_hint"] == ""

    unchanged = api.patch("/providers/p1", {"api_key": None}, if_match='W/"4"')
    assert unchanged.json()["version"] == 4

    renamed = api.patch("/providers/p1", {"name": "p9"}, if_match='W/"4"')
    assert renamed.status_code == 422 and renamed.json()["detail"][0]["loc"] == ["body", "name"]
    wrong_type = api.patch("/providers/p1", {"api_key": 12345}, if_match='W/"4"')
    assert wrong_type.status_code == 422 and wrong_type.json()["detail"][0]["loc"] == [
        "body",
        "api_key",
    ]


def test_a_provider_in_use_cannot_be_deleted(api: Api) -> None:
    api.provider("p1")
    api.group("auto")
    refused = api.delete("/providers/p1", if_match='W/"1"')
    assert refused.status_code == 422
    assert "used by group(s) auto" in refused.json()["detail"][0]["msg"]
    assert api.delete("/groups/auto", if_match='W/"1"').status_code == 204
    assert api.delete("/providers/p1", if_match='W/"1"').status_code == 204
    assert not Provider.objects.exists()
    assert api.get("/providers/p1").status_code == 404


def test_refresh_models_loads_the_upstream_list(api: Api, guarded: FakeUpstream) -> None:
    api.provider("p1", base_url=guarded.base_url, api_key=KEY)
    refreshed = api.post("/providers/p1/refresh-models")
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["models"] == ["m-large", "m-small"]  # deduplicated, in order
    assert refreshed.json()["models_loaded_at"] is not None
    assert refreshed["ETag"] == 'W/"2"'
    again = api.post("/providers/p1/refresh-models")
    assert again.json()["version"] == 2  # same list: no new version


def test_refresh_models_reads_a_gemini_list(api: Api, guarded: FakeUpstream) -> None:
    """Google's ``{"models": [{"name": "models/…"}]}`` at ``<base>/v1beta/models`` with the
    key in ``x-goog-api-key``; a model that cannot generateContent is left out."""
    root = guarded.base_url.removesuffix("/v1")
    api.provider("g1", kind="gemini", base_url=root, api_key=KEY)
    refreshed = api.post("/providers/g1/refresh-models")
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["models"] == ["m-large", "m-small"]


def test_refresh_models_errors_are_424_and_never_echo_the_credential(
    api: Api, guarded: FakeUpstream, closed_port: int
) -> None:
    wrong = "sk-wrong-key-9999999999"
    api.provider("p1", base_url=guarded.base_url, api_key=wrong)
    refused = api.post("/providers/p1/refresh-models")
    assert refused.status_code == 424
    detail = refused.json()["detail"]
    assert detail.startswith("HTTP 401 from ") and "[redacted]" in detail
    assert wrong not in refused.content.decode()

    api.provider("p2", base_url=f"http://127.0.0.1:{closed_port}/v1")
    unreachable = api.post("/providers/p2/refresh-models")
    assert unreachable.status_code == 424
    assert unreachable.json()["detail"].startswith("could not reach ")
    assert Provider.objects.get(name="p2").models == []


def test_test_sends_one_cheap_completion(api: Api, guarded: FakeUpstream, closed_port: int) -> None:
    guarded.reset()
    guarded.script("m-large", Reply("pong"))
    api.provider("p1", base_url=guarded.base_url, api_key=KEY, models=["m-large"])
    result = api.post("/providers/p1/test").json()
    assert result["ok"] is True and result["status"] == 200 and result["latency_ms"] > 0
    [request] = guarded.requests
    assert request.body["max_tokens"] == 1 and request.body["stream"] is False
    assert request.body["model"] == "m-large"

    api.provider(
        "p2", base_url=guarded.base_url, api_key="sk-wrong-key-8888888888", models=["m-large"]
    )
    failed = api.post("/providers/p2/test")
    assert failed.status_code == 200
    assert failed.json()["ok"] is False and failed.json()["status"] == 401
    assert "sk-wrong-key-8888888888" not in failed.content.decode()

    api.provider("p3", base_url=f"http://127.0.0.1:{closed_port}/v1", models=["x"])
    down = api.post("/providers/p3/test").json()
    assert (
        down["ok"] is False
        and down["status"] is None
        and down["message"].startswith("connection failed")
    )
    api.provider("p4")
    assert api.post("/providers/p4/test").json()["message"].startswith("no models known")


def _disable(runtime: Any, provider: str) -> None:
    failure = Failure(FailureCode.AUTH, "invalid key", 401)
    async_to_sync(runtime.store.disable_provider)(provider, failure, runtime.clock())


def _disabled(runtime: Any, provider: str) -> bool:
    snapshot = async_to_sync(runtime.store.snapshot)([], [provider])
    health = snapshot.providers.get(provider)
    return bool(health and health.disabled)


def test_enable_lifts_a_disabled_credential_and_names_who(api: Api, runtime_state: Any) -> None:
    api.provider("p1")
    _disable(runtime_state, "p1")
    assert _disabled(runtime_state, "p1")
    response = api.post("/providers/p1/enable")
    assert response.status_code == 200
    assert not _disabled(runtime_state, "p1")
    [event] = [e for e in runtime_state.hub.recent if isinstance(e, HealthEvent)]
    assert event.kind is EventKind.ENABLED and event.message == "enabled by key:ops"
    assert api.post("/providers/ghost/enable").status_code == 404


def test_a_new_credential_also_lifts_a_disabled_provider(api: Api, runtime_state: Any) -> None:
    api.provider("p1", api_key=KEY)
    _disable(runtime_state, "p1")
    api.patch("/providers/p1", {"base_url": "http://127.0.0.1:11/v1"}, if_match='W/"1"')
    assert _disabled(runtime_state, "p1")  # not a credential change
    api.patch("/providers/p1", {"api_key": "sk-rotated-key-0000000"}, if_match='W/"2"')
    assert not _disabled(runtime_state, "p1")


def test_the_health_check_interval_is_set_per_provider(api: Api, settings: Any) -> None:
    from routing.admin import ProviderAdminForm
    from routing.gateway.runtime import get_runtime

    assert api.provider("p1", health_check_s=30)["health_check_s"] == 30.0
    assert api.provider("p2")["health_check_s"] is None  # the gateway's interval
    assert api.provider("p3", health_check_s=0)["health_check_s"] == 0.0  # off
    table = get_runtime().reload()
    intervals = {name: p.check_interval_s for name, p in table.providers.items()}
    assert intervals == {"p1": 30.0, "p2": settings.SWITCHYARD["HEALTH_CHECK_S"], "p3": 0.0}

    # PATCH: a value replaces, null returns to the gateway's, a key left out keeps it
    etag = api.etag("/providers/p1")
    assert api.patch("/providers/p1", {"health_check_s": 5}, if_match=etag).json()[
        "health_check_s"
    ] == (5.0)
    kept = api.patch("/providers/p1", {"base_url": "http://x.test/v1"}, if_match='W/"2"')
    assert kept.json()["health_check_s"] == 5.0
    cleared = api.patch("/providers/p1", {"health_check_s": None}, if_match='W/"3"')
    assert cleared.json()["health_check_s"] is None

    for bad in (0.5, -1, 3601, "10"):
        response = api.post(
            "/providers", {"name": "p4", "base_url": "http://x.test/v1", "health_check_s": bad}
        )
        assert response.status_code == 422, bad
        assert [e["loc"] for e in response.json()["detail"]] == [["body", "health_check_s"]]

    # the admin validates through the same schema
    data = {
        "name": "p5",
        "kind": "openai",
        "base_url": "http://x.test/v1",
        "headers": "{}",
        "models": "[]",
        "connect_timeout_s": 5,
        "headers_timeout_s": 10,
        "first_token_timeout_s": 60,
        "idle_timeout_s": 60,
        "total_timeout_s": 600,
    }
    rejected = ProviderAdminForm(data={**data, "health_check_s": 0.5})
    assert not rejected.is_valid()
    assert "at least 1 s" in " ".join(rejected.errors["health_check_s"])
    accepted = ProviderAdminForm(data={**data, "health_check_s": 20})
    assert accepted.is_valid(), accepted.errors
    assert accepted.save().health_check_s == 20.0
    assert ProviderAdminForm(data={**data, "name": "p6", "health_check_s": ""}).is_valid()


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [
        ("api_key", "sk-clé-ünicode", "credential"),
        ("headers", {"x-team": "équipe"}, "header x-team"),
    ],
)
def test_a_stored_unsendable_value_fails_test_and_refresh_as_configuration(
    api: Api, column: str, value: Any, what: str
) -> None:
    api.provider("p1", api_key=KEY, models=["a"])
    row = Provider.objects.get(name="p1")  # as a row written before validation may hold
    if column == "api_key":
        row.set_api_key(value)
    else:
        row.set_headers(value)
    row.save()
    expected = f"MISSING_CREDENTIAL: the provider's {what} is not printable ASCII"

    tested = api.post("/providers/p1/test")
    assert tested.status_code == 200 and tested["content-type"].startswith("application/json")
    assert tested.json()["ok"] is False and tested.json()["status"] is None
    assert tested.json()["message"].startswith(expected)

    refreshed = api.post("/providers/p1/refresh-models")
    assert refreshed.status_code == 424 and refreshed["content-type"].startswith("application/json")
    assert refreshed.json()["detail"].startswith(expected)
    assert Provider.objects.get(name="p1").models == ["a"]  # nothing changed


def test_the_file_and_the_api_refuse_it_alike(api: Api) -> None:
    text = "providers:\n  - {name: p1, base_url: 'http://169.254.169.254/latest'}\n"
    with pytest.raises(ConfigError) as from_file:
        load_text(text, env={})
    assert "providers.0.base_url: '169.254.169.254' is a cloud metadata service" in (
        from_file.value.format()
    )
    created = api.post("/providers", {"name": "p1", "base_url": "http://[fd00:ec2::254]/x"})
    assert created.status_code == 422
    [detail] = created.json()["detail"]
    assert detail["loc"] == ["body", "base_url"] and "metadata service" in detail["msg"]
    api.provider("p1")
    moved = api.patch("/providers/p1", {"base_url": "http://127.0.0.1:9/v1#"}, if_match='W/"1"')
    assert moved.status_code == 422 and "fragment" in moved.json()["detail"][0]["msg"]


LEAKY_BODY = (
    b"Forbidden: this is not a model server\n"
    b'{"Code": "Success", "AccessKeyId": "ASIAEXAMPLEEXAMPLE", "Token": "IQoJb3JpZ2luX2VjE"}\n'
    + b"x"
    * 2000
)


@pytest.fixture
def leaky() -> Iterator[str]:
    """A loopback server that answers every GET with a 403 and a long, multi-line body:
    what a misdirected base_url might reach."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(403)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(LEAKY_BODY)))
            self.end_headers()
            self.wfile.write(LEAKY_BODY)

        do_POST = do_GET  # noqa: N815  (the test's completion)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_failed_refresh_says_what_failed_but_never_echoes_the_reply(api: Api, leaky: str) -> None:
    api.provider("p1", base_url=leaky, models=["a"])
    refused = api.post("/providers/p1/refresh-models")
    assert refused.status_code == 424
    detail = refused.json()["detail"]
    assert detail == f"HTTP 403 from {leaky}/models: Forbidden: this is not a model server"
    tested = api.post("/providers/p1/test").json()
    assert tested["ok"] is False and tested["status"] == 403
    assert tested["message"] == "Forbidden: this is not a model server"
    for answer in (refused.content, str(tested).encode()):
        assert b"AccessKeyId" not in answer and b"xxxxxx" not in answer


def test_a_stored_metadata_base_url_fails_test_refresh_and_calls_as_configuration(
    api: Api,
) -> None:
    """A row written before the schema refused it (issue 37 item 6) is never called."""
    from routing.gateway.table import compile_table

    api.provider("p1", models=["a"])
    Provider.objects.filter(name="p1").update(base_url="http://169.254.169.254/latest")
    expected = "MISSING_CREDENTIAL: the provider's base_url is a cloud metadata service"
    tested = api.post("/providers/p1/test").json()
    assert tested["ok"] is False and tested["message"].startswith(expected)
    refreshed = api.post("/providers/p1/refresh-models")
    assert refreshed.status_code == 424 and refreshed.json()["detail"].startswith(expected)
    spec = compile_table().providers["p1"]
    assert spec.config_error == "the provider's base_url is a cloud metadata service"
