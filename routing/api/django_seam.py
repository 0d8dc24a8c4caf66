"""The one module that reaches into Django's private parts, for the lean ``/v1`` handler
(``routing.api.asgi``): as ``routing/upstream/transport.py`` is for aiohttp and httpx.

The handler skips what the gateway path does not need (per-request signals, thread hops,
the page's middleware), and that takes six things Django does not promise:

- ``HttpRequest.body`` keeps what it read in ``_body`` and a ``BytesIO`` over it in
  ``_stream``, and nowhere else: :func:`forget_body` drops both, so a stream relayed for
  minutes does not hold an agent's history of hundreds of KB.
- ``BaseHandler.get_response_async`` puts the request's ``close`` among the response's
  closers (``_resource_closers``), so a response holds its request until it is closed:
  :func:`release_request` closes the request at once and takes it off, so a stream
  relayed for minutes does not hold the request object, its headers and its ``META``.
- ``HttpResponseBase.close`` runs the callables in ``_resource_closers``, clears them, sets
  ``closed`` and then sends ``request_finished``: :func:`close_response` does all but the
  signal (nothing to recycle: the call path never touches the database).
- ``BaseHandler.load_middleware`` reads ``settings.MIDDLEWARE`` while it runs:
  :func:`middleware_setting` swaps it for the lean handler's (empty) list meanwhile.
- ``ASGIHandler.handle`` is a fixed sequence of overridable steps (``read_body``,
  ``create_request``, ``run_get_response``, ``send_response``, ``listen_for_disconnect``,
  with ``get_script_prefix``): ``GatewayASGIHandler.handle`` is that method without the
  signals and thread hops, so it was copied from the source :data:`HANDLE_SHA256` digests.
  ``ASGIRequest.scope`` is the connection's scope (:func:`asgi_scope`).
- ``BaseHandler.get_response_async`` logs every response of status 400 or more on
  ``django.request`` unless ``django.utils.log.log_response`` finds ``_has_been_logged``
  set on it: :func:`mark_logged` sets it on a reply the gateway logged itself (an
  exhausted call's one ERROR line), so the same failure is not logged twice.

They were written for the Django series in :data:`WRITTEN_FOR` (pinned in pyproject.toml);
``tests/api/test_django_seam_contract.py`` checks each one and fails loudly when an upgrade
changes it, instead of letting a request body leak or a signal fire on every call.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

WRITTEN_FOR = {"Django": "5.2"}  # the series: pyproject.toml pins Django>=5.2,<5.3
# sha256 of inspect.getsource(django.core.handlers.asgi.ASGIHandler.handle), Django 5.2.19
HANDLE_SHA256 = "98faeb5bef800331e6a8002fbc96b30e4122a23438ae45a047190a531ea11323"


def installed_versions() -> dict[str, str]:
    """The installed series (major.minor) of each library in :data:`WRITTEN_FOR`."""
    return {name: ".".join(version(name).split(".")[:2]) for name in WRITTEN_FOR}


def forget_body(request: HttpRequest) -> None:
    """Drop the request body ``request.body`` read and cached (``request.body`` is ``b""``
    from here on)."""
    request._body = b""
    request._stream = io.BytesIO()


def release_request(request: HttpRequest, response: HttpResponseBase) -> None:
    """Close ``request`` now, not when ``response`` closes (Django's handler put its
    ``close`` among the response's closers)."""
    closers: list[Callable[[], object]] = response._resource_closers  # type: ignore[attr-defined]
    for index, closer in enumerate(closers):
        if getattr(closer, "__self__", None) is request:
            del closers[index]
            closer()
            return


def close_response(response: HttpResponseBase) -> None:
    """``HttpResponse.close`` without its ``request_finished`` signal."""
    # Django's own list of closers; private, so django-stubs does not declare it.
    closers: list[Callable[[], object]] = response._resource_closers  # type: ignore[attr-defined]
    for closer in closers:
        try:
            closer()
        except Exception:  # noqa: BLE001 - as Django does: closing must not fail a response
            pass
    closers.clear()
    response.closed = True


@contextmanager
def middleware_setting(middleware: list[str]) -> Iterator[None]:
    """``settings.MIDDLEWARE`` is ``middleware`` inside the block: a handler that loads its
    middleware there loads these. Only at start-up, before any request is served."""
    full = settings.MIDDLEWARE
    settings.MIDDLEWARE = middleware
    try:
        yield
    finally:
        settings.MIDDLEWARE = full


def mark_logged(response: HttpResponseBase) -> None:
    """Tell Django the response was logged already (no second ``django.request`` line)."""
    response._has_been_logged = True  # type: ignore[attr-defined]


def asgi_scope(request: HttpRequest) -> Mapping[str, Any]:
    """The ASGI scope of a request the ASGI handler made; empty for any other request."""
    scope: Mapping[str, Any] = getattr(request, "scope", {})
    return scope
