"""The dashboard websocket through the whole ASGI stack: origin check, session, staff
gate, and the pushes it carries (health, calls, config saves)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import CircuitPolicy, EventKind, HealthEvent
from routing.gateway.events import AttemptRecord, CallRecord

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")  # a browser's upgrade request always names the host


def _session_cookie(username: str, *, staff: bool) -> bytes:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_user(username, password="pw-for-tests-only", is_staff=staff)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


session_cookie = database_sync_to_async(_session_cookie)


def communicator(*headers: tuple[bytes, bytes], host: bytes = HOST[1]) -> WebsocketCommunicator:
    from router_project.asgi import application

    return WebsocketCommunicator(application, "/ws/dashboard/", headers=[(b"host", host), *headers])


@pytest.fixture
async def live(
    transactional_db: None, fresh_runtime: object
) -> AsyncIterator[WebsocketCommunicator]:
    cookie = await session_cookie("operator", staff=True)
    socket = communicator(ORIGIN, (b"cookie", cookie))
    connected, _ = await socket.connect()
    assert connected
    yield socket
    await socket.disconnect()


async def test_anonymous_sockets_are_closed_with_4403(transactional_db: None) -> None:
    socket = communicator(ORIGIN)
    connected, code = await socket.connect()
    assert (connected, code) == (False, 4403)


async def test_non_staff_sessions_are_closed_with_4403(transactional_db: None) -> None:
    socket = communicator(ORIGIN, (b"cookie", await session_cookie("visitor", staff=False)))
    connected, code = await socket.connect()
    assert (connected, code) == (False, 4403)


async def test_a_foreign_origin_is_refused_even_with_a_staff_session(
    transactional_db: None,
) -> None:
    cookie = await session_cookie("operator", staff=True)
    socket = communicator((b"origin", b"http://evil.example"), (b"cookie", cookie))
    connected, _ = await socket.connect()
    assert connected is False


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        (b"127.0.0.1:8000", b"http://127.0.0.1:8001"),  # another app on the same host
        (b"127.0.0.1:8000", b"http://127.0.0.1"),  # the same host on port 80
        (b"127.0.0.1:8000", b"https://127.0.0.1:8000"),  # another scheme
        (b"127.0.0.1", b"http://127.0.0.1:443"),
        (b"evil.example:8000", b"http://evil.example:8000"),  # a host not in ALLOWED_HOSTS
        (b"127.0.0.1:8000", b"null"),  # a sandboxed frame or a file
    ],
)
async def test_another_origin_on_the_same_host_is_refused_with_a_staff_session(
    transactional_db: None, host: bytes, origin: bytes
) -> None:
    cookie = await session_cookie("operator", staff=True)
    socket = communicator((b"origin", origin), (b"cookie", cookie), host=host)
    connected, _ = await socket.connect()
    assert connected is False


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        (b"127.0.0.1:8000", b"http://127.0.0.1:8000"),
        (b"LOCALHOST:8000", b"http://localhost:8000"),  # host names are case-insensitive
        (b"127.0.0.1", b"http://127.0.0.1:80"),  # the default port, written or not
        (b"[::1]:8000", b"http://[::1]:8000"),
    ],
)
async def test_the_same_origin_is_accepted(
    transactional_db: None, fresh_runtime: object, host: bytes, origin: bytes
) -> None:
    cookie = await session_cookie("operator", staff=True)
    socket = communicator((b"origin", origin), (b"cookie", cookie), host=host)
    connected, _ = await socket.connect()
    assert connected is True
    await socket.disconnect()


async def test_without_an_origin_header_the_socket_is_refused(transactional_db: None) -> None:
    cookie = await session_cookie("operator", staff=True)
    connected, _ = await communicator((b"cookie", cookie)).connect()
    assert connected is False


async def test_behind_a_tls_proxy_the_https_origin_is_the_sockets_own(
    transactional_db: None, fresh_runtime: object, settings: Any
) -> None:
    """SWITCHYARD_HTTPS trusts the proxy's X-Forwarded-Proto: the page was https."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    cookie = await session_cookie("operator", staff=True)
    https = (b"origin", b"https://localhost")
    forwarded = (b"x-forwarded-proto", b"https")
    socket = communicator(https, (b"cookie", cookie), forwarded, host=b"localhost")
    assert (await socket.connect())[0] is True
    await socket.disconnect()
    plain = communicator(https, (b"cookie", cookie), host=b"localhost")
    assert (await plain.connect())[0] is False  # no header: the socket is plain http


async def test_a_committed_group_save_is_announced_with_its_version(
    live: WebsocketCommunicator, configure: Callable[..., None]
) -> None:
    from routing import services
    from routing.models import Group

    await database_sync_to_async(configure)()
    version = await database_sync_to_async(lambda: Group.objects.get(name="auto").version)()
    await drain(live)  # the config file's own notices
    await database_sync_to_async(services.group_update_policy)(
        name="auto", changes={"retry.max_retries": 1}, based_on=version, actor="user:t", path="page"
    )
    message = await next_of_kind(live, "group.changed")
    assert (message["name"], message["version"]) == ("auto", version + 1)


async def test_a_refused_write_announces_nothing(
    live: WebsocketCommunicator, configure: Callable[..., None]
) -> None:
    from routing import services

    await database_sync_to_async(configure)()
    await drain(live)
    with pytest.raises(services.VersionConflict):
        await database_sync_to_async(services.group_update_policy)(
            name="auto", changes={"retry.max_retries": 1}, based_on=0, actor="user:t", path="page"
        )
    assert await live.receive_nothing(timeout=0.3)


async def test_health_changes_push_fresh_badges(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    now = fresh_runtime.clock()
    events = await fresh_runtime.store.record_failure(
        "p1/a",
        Failure(FailureCode.RATE_LIMIT, "slow down", 429, retry_after_s=30.0),
        CircuitPolicy(),
        now,
        was_probe=False,
    )
    fresh_runtime.hub.publish_all(events)
    message = await next_of_kind(live, "health.changed")
    badge = message["badges"]["p1/a"]
    assert 'data-badge="p1/a"><span class="badge badge-cooling"' in badge
    assert f'data-until="{now + 30.0:.3f}"' in badge
    assert message["now"] == pytest.approx(now, abs=5)


async def test_finished_calls_are_pushed_as_chain_rows(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    record = CallRecord(
        call_id="call-1",
        group="auto",
        session=None,
        stream=False,
        started_at=fresh_runtime.clock(),
        served_by="p2/b",
        elapsed_ms=900.0,
        attempts=[
            AttemptRecord("p1/a", 1, False, 5.0, code="RATE_LIMIT", status=429),
            AttemptRecord("p1/a", 2, False, 5.0, code="RATE_LIMIT", status=429),
            AttemptRecord("p2/b", 1, True, 840.0),
        ],
    )
    fresh_runtime.hub.publish(record)
    message = await next_of_kind(live, "call.recorded")
    assert (message["group"], message["call_id"]) == ("auto", "call-1")
    assert "<code>p1/a</code> ✕ RATE_LIMIT (429) tried 2× → 2" in message["html"]
    assert "<code>p2/b</code> ✓ 840 ms" in message["html"]


async def test_a_refused_call_is_pushed_too_so_spend_and_limits_reload(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    """The Spend panel and the groups' limits lines reload on ``call.recorded`` (named by
    its group, dashboard.js): a call refused by a limit moves the counters too."""
    from routing.gateway.events import CallOutcome

    record = CallRecord(
        call_id="refused-1",
        group="capped",
        session=None,
        stream=False,
        started_at=fresh_runtime.clock(),
        outcome=CallOutcome.REFUSED,
        error_code="rpm_limit",
        http_status=429,
        elapsed_ms=0.2,
    )
    fresh_runtime.hub.publish(record)
    message = await next_of_kind(live, "call.recorded")
    assert (message["group"], message["call_id"]) == ("capped", "refused-1")


async def test_a_replaced_hub_is_followed_on_the_next_connect(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    from routing.gateway.events import EventHub

    old = fresh_runtime.hub
    fresh_runtime.hub = EventHub()
    cookie = await session_cookie("second", staff=True)
    other = communicator(ORIGIN, (b"cookie", cookie))
    assert (await other.connect())[0]
    assert old._subscribers == []  # the push subscription moved to the new hub
    fresh_runtime.hub.publish(HealthEvent(EventKind.RESET, "p1/a", "p1", fresh_runtime.clock()))
    assert (await next_of_kind(other, "health.changed"))["badges"]["p1/a"]
    await other.disconnect()


async def test_without_an_open_socket_nothing_is_rendered_or_sent(fresh_runtime: Any) -> None:
    from dashboard import broadcast

    broadcast.follow_hub()
    assert broadcast.BROADCASTER.listeners == 0
    record = CallRecord(call_id="c", group="auto", session=None, stream=False, started_at=0.0)
    fresh_runtime.hub.publish(record)
    assert broadcast.BROADCASTER.pending == 0


async def next_of_kind(socket: WebsocketCommunicator, kind: str) -> dict[str, Any]:
    for _ in range(20):
        message = await socket.receive_json_from(timeout=3)
        if message["kind"] == kind:
            return message
    raise AssertionError(f"no {kind} message")


async def drain(socket: WebsocketCommunicator) -> None:
    while not await socket.receive_nothing(timeout=0.2):
        await socket.receive_from()


def _call(call_id: str, group: str, *, ok: bool, key_id: int | None) -> CallRecord:
    return CallRecord(
        call_id=call_id,
        group=group,
        session=None,
        stream=False,
        started_at=0.0,
        outcome="ok" if ok else "failed",
        served_by="p2/b" if ok else None,
        error_code=None if ok else "ROUTES_EXHAUSTED",
        elapsed_ms=10.0,
        key_id=key_id,
        key_name="agents" if key_id else "",
        attempts=[AttemptRecord("p2/b", 1, ok, 5.0, code=None if ok else "SERVER")],
    )


async def test_the_calls_page_gets_only_the_calls_its_filters_match(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    await live.send_json_to({"watch_calls": "group=auto&outcome=failed&key=7"})
    for record in (
        _call("ok-call", "auto", ok=True, key_id=7),  # outcome differs
        _call("other-key", "auto", ok=False, key_id=8),  # key differs
        _call("other-group", "solo", ok=False, key_id=7),  # group differs
        _call("match", "auto", ok=False, key_id=7),
    ):
        fresh_runtime.hub.publish(record)
    rows = []
    while True:
        message = await live.receive_json_from(timeout=2)
        if message["kind"] == "calls.row":
            rows.append(message)
        if message["kind"] == "call.recorded" and message["call_id"] == "match":
            break
    rows.append(await live.receive_json_from(timeout=2))  # its row follows its chain push
    assert [(m["kind"], m["call_id"]) for m in rows] == [("calls.row", "match")]
    assert 'data-call-id="match"' in rows[0]["html"] and "ROUTES_EXHAUSTED" in rows[0]["html"]


async def test_invalid_calls_filters_watch_nothing(
    live: WebsocketCommunicator, fresh_runtime: Any
) -> None:
    await live.send_json_to({"watch_calls": "outcome=maybe"})
    fresh_runtime.hub.publish(_call("c", "auto", ok=False, key_id=None))
    message = await next_of_kind(live, "call.recorded")
    assert message["call_id"] == "c"
    assert await live.receive_nothing(timeout=0.2)
