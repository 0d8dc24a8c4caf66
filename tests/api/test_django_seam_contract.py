"""The lean ``/v1`` handler's contract with the Django internals it reaches into
(``routing/api/django_seam.py``), like ``tests/upstream/test_transport_contract.py`` for
aiohttp and httpx.

If a Django upgrade changes what the seam relies on, these fail loudly: a relayed stream
would otherwise hold its request body for minutes, every call fire ``request_finished``,
or the page's middleware run on the gateway path, in silence.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import RequestAborted
from django.core.handlers import asgi as django_asgi
from django.core.handlers.asgi import ASGIHandler, ASGIRequest
from django.core.signals import request_finished
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.utils.log import log_response

from routing.api.asgi import GatewayASGIHandler, started_at
from routing.api.django_seam import (
    HANDLE_SHA256,
    WRITTEN_FOR,
    asgi_scope,
    close_response,
    forget_body,
    installed_versions,
    mark_logged,
    release_request,
)

BODY = b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}'


def test_the_installed_django_is_the_one_the_seam_was_written_for() -> None:
    assert installed_versions() == WRITTEN_FOR, (
        "routing/api/django_seam.py reaches into Django's private parts; check each of "
        "them against the new version (this module says how), then update WRITTEN_FOR "
        "and the pin in pyproject.toml"
    )


def test_djangos_handle_is_the_one_the_lean_handler_copies() -> None:
    source = inspect.getsource(ASGIHandler.handle)
    assert hashlib.sha256(source.encode()).hexdigest() == HANDLE_SHA256, (
        "Django's ASGIHandler.handle changed: GatewayASGIHandler.handle is a copy of it "
        "without the request signals and thread hops; bring the changes across, then "
        "update HANDLE_SHA256"
    )


@pytest.mark.parametrize(
    ("step", "parameters"),
    [
        ("read_body", ["self", "receive"]),
        ("create_request", ["self", "scope", "body_file"]),
        ("run_get_response", ["self", "request"]),
        ("send_response", ["self", "response", "send"]),
        ("listen_for_disconnect", ["self", "receive"]),
        ("load_middleware", ["self", "is_async"]),
    ],
)
def test_the_steps_the_lean_handler_calls_take_what_it_passes(
    step: str, parameters: list[str]
) -> None:
    assert list(inspect.signature(getattr(ASGIHandler, step)).parameters) == parameters
    assert list(inspect.signature(django_asgi.get_script_prefix).parameters) == ["scope"]


def asgi_request(path: str = "/v1/chat/completions") -> ASGIRequest:
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
        ],
    }
    return ASGIRequest(scope, io.BytesIO(BODY))


def holding(request: HttpRequest, body: bytes) -> list[str]:
    """The request's attributes that keep ``body`` alive."""
    return sorted(
        name
        for name, value in vars(request).items()
        if value is body or (isinstance(value, io.BytesIO) and value.getvalue() == body)
    )


def test_a_read_body_is_kept_only_where_forget_body_drops_it() -> None:
    request = asgi_request()
    body = request.body
    assert body == BODY
    assert holding(request, body) == ["_body", "_stream"]
    forget_body(request)
    assert holding(request, body) == []
    assert request.body == b"" and request.read() == b""


class Closable:
    """A streaming body with a ``close`` Django must call when the response closes."""

    def __init__(self) -> None:
        self.closes = 0

    def __iter__(self) -> Iterator[bytes]:
        return iter([b"data: {}\n\n"])

    def close(self) -> None:
        self.closes += 1


@pytest.fixture
def finished() -> Iterator[list[object]]:
    """Every ``request_finished`` sent while the test runs."""
    sent: list[object] = []

    def receiver(sender: object, **_: Any) -> None:
        sent.append(sender)

    request_finished.connect(receiver, weak=False)
    yield sent
    request_finished.disconnect(receiver)


def test_django_does_not_log_a_response_mark_logged_marked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``log_response`` (what ``get_response_async`` calls for a status >= 400) skips a
    response marked by mark_logged, and logs an unmarked one at ERROR."""
    caplog.set_level(logging.INFO, logger="django.request")
    request = HttpRequest()
    plain, marked = HttpResponse(status=502), HttpResponse(status=502)
    mark_logged(marked)
    log_response("%s: %s", "Bad Gateway", "/v1/x", response=marked, request=request)
    assert [r for r in caplog.records if r.name == "django.request"] == []
    log_response("%s: %s", "Bad Gateway", "/v1/x", response=plain, request=request)
    assert [r.levelno for r in caplog.records if r.name == "django.request"] == [logging.ERROR]


def test_django_closes_a_response_by_its_closers_and_then_the_signal(
    finished: list[object],
) -> None:
    """What close_response copies, and the one thing it leaves out."""
    body = Closable()
    response = StreamingHttpResponse(body)
    response.close()
    assert (body.closes, response.closed, len(finished)) == (1, True, 1)


def test_close_response_runs_the_closers_once_without_the_signal(
    finished: list[object],
) -> None:
    body = Closable()
    response = StreamingHttpResponse(body)
    close_response(response)
    close_response(response)
    assert (body.closes, response.closed, finished) == (1, True, [])


def test_a_failing_closer_does_not_stop_the_others(finished: list[object]) -> None:
    calls: list[str] = []

    def failing() -> None:
        calls.append("failing")
        raise OSError("gone")

    response = HttpResponse(b"{}")
    response._resource_closers.extend([failing, lambda: calls.append("next")])  # type: ignore[attr-defined]
    close_response(response)
    assert (calls, response.closed, finished) == (["failing", "next"], True, [])


async def test_a_response_holds_its_request_until_release_request_closes_it() -> None:
    """Django's handler puts the request's ``close`` among the response's closers, so the
    response keeps the request alive; release_request closes it and lets it go."""
    request = asgi_request("/v1/models")  # a POST there is refused at once: no call runs
    logging.disable(logging.CRITICAL)  # a log record of the answer would hold the request too
    try:
        response = await GatewayASGIHandler().get_response_async(request)
    finally:
        logging.disable(logging.NOTSET)
    closers = response._resource_closers  # type: ignore[attr-defined]
    assert request.close in closers
    count = len(closers)
    gone = weakref.ref(request)
    release_request(request, response)
    assert request.close not in closers and len(closers) == count - 1
    release_request(request, response)  # a second time: nothing more to take
    assert len(closers) == count - 1
    del request
    assert gone() is None  # freed as soon as the handler lets go, the response open
    close_response(response)


MADE: list[str] = []


class CountingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        MADE.append(type(self).__name__)
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)


def test_the_lean_handler_loads_none_of_the_sites_middleware() -> None:
    """``load_middleware`` reads ``settings.MIDDLEWARE`` while it runs: Django's handler
    builds the site's, the lean one (swapping the setting meanwhile) builds none."""
    MADE.clear()
    site = [f"{__name__}.CountingMiddleware"]
    with override_settings(MIDDLEWARE=site):
        ASGIHandler()
        assert MADE == ["CountingMiddleware"]
        GatewayASGIHandler()
        assert MADE == ["CountingMiddleware"]
        assert settings.MIDDLEWARE == site  # put back after loading


def test_an_asgi_request_carries_its_scope() -> None:
    request = asgi_request()
    assert asgi_scope(request)["path"] == "/v1/chat/completions"
    request.scope["switchyard.started"] = 12.5
    assert started_at(request) == 12.5
    assert asgi_scope(HttpRequest()) == {} and started_at(HttpRequest()) is None


async def test_a_client_that_leaves_ends_the_reads_with_request_aborted() -> None:
    handler = GatewayASGIHandler()

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    with pytest.raises(RequestAborted):
        await handler.listen_for_disconnect(receive)
    with pytest.raises(RequestAborted):
        await handler.read_body(receive)


async def test_create_request_answers_a_request_and_no_error() -> None:
    handler = GatewayASGIHandler()
    request = asgi_request()
    made, error = handler.create_request(request.scope, io.BytesIO(BODY))
    assert error is None and isinstance(made, ASGIRequest) and made.body == BODY
