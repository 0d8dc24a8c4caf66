"""``ALLOWED_HOSTS`` on ``/v1``: the lean handler (``routing.api.asgi``) has no middleware,
so nothing there ever asked Django's ``request.get_host()``, and ``/v1`` answered to any
``Host`` (DNS rebinding: a page on another name reaching a gateway on loopback).

:func:`host_refusal` asks Django's own rule (``validate_host``, with ``DEBUG``'s localhost
defaults) once per distinct ``Host`` value and keeps the verdict (a dict lookup per request
after that; at most :data:`HOSTS_KEPT` values, so made-up names cannot grow it). A refused
host gets a 400 in the door's own shape before the body is read. The verdicts go when the
settings change (tests' ``override_settings``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpResponse
from django.http.request import split_domain_port, validate_host

from routing.gateway.replies import ErrorReply
from routing.protocols import Protocol

HOSTS_KEPT = 256
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]  # Django's own, for DEBUG without a list

_verdicts: dict[bytes, bool] = {}


def _allowed(host: bytes) -> bool:
    verdict = _verdicts.get(host)
    if verdict is None:
        allowed = settings.ALLOWED_HOSTS
        if settings.DEBUG and not allowed:
            allowed = DEBUG_HOSTS
        domain, _port = split_domain_port(host.decode("latin-1"))
        verdict = bool(domain) and validate_host(domain, allowed)
        if len(_verdicts) >= HOSTS_KEPT:
            _verdicts.clear()
        _verdicts[host] = verdict
    return verdict


def host_refusal(scope: dict[str, Any]) -> HttpResponse | None:
    """None when the request's ``Host`` is allowed; else the 400 to answer with."""
    host = b""
    for name, value in scope["headers"]:
        if name == b"host":
            host = value
            break
    else:
        server = scope.get("server")
        if server:  # HTTP/1.0 without Host: as Django, the server's own name and port
            host = f"{server[0]}:{server[1]}".encode("latin-1")
    if _allowed(host):
        return None
    path: str = scope.get("path", "")
    reply = ErrorReply(
        400,
        "This host name is not served here (ALLOWED_HOSTS).",
        "invalid_host",
        door=Protocol.MESSAGES if "/messages" in path else Protocol.CHAT,
    )
    body = reply.body
    response = HttpResponse(body, status=400, content_type="application/json")
    response["content-length"] = str(len(body))
    return response


def _forget(**_kwargs: Any) -> None:
    _verdicts.clear()


setting_changed.connect(_forget, dispatch_uid="switchyard-hosts")
