"""The websocket's origin check: only pages of this very origin (scheme, host and port)
may open the dashboard's socket (SPEC §9).

A browser sends the staff session cookie with any websocket it opens to this host, whatever
page opened it; the ``Origin`` header is the only sign of which page that was. Channels'
``AllowedHostsOriginValidator`` compares the origin's host with ``ALLOWED_HOSTS`` and
ignores its scheme and port, so another application on the same host (another port) could
read the live feed with the operator's cookie. This check is Django's CSRF origin rule
(``CsrfViewMiddleware._origin_verified``) applied to the upgrade request:

- the origin must equal the socket's own origin: ``https`` when the socket is ``wss`` or
  the trusted proxy header (``SECURE_PROXY_SSL_HEADER``, set by ``SWITCHYARD_HTTPS``) says
  so, else ``http``; the ``Host`` header's host and port (default ports made explicit on
  both sides); and that host must be in ``ALLOWED_HOSTS``;
- or it is listed in ``CSRF_TRUSTED_ORIGINS`` (a proxy that rewrites ``Host``).

A missing or unparsable ``Origin`` or ``Host`` is refused. Refusals close the handshake as
Channels' validators do (``WebsocketDenier``: HTTP 403 under daphne).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # scheme, host, port


def parse_origin(value: str) -> Origin | None:
    """``scheme://host[:port]`` as a comparable triple, or None if it is not one."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number or out of range
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname, port


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _is_secure(scope: dict[str, Any]) -> bool:
    if scope.get("scheme") == "wss":
        return True
    trusted: tuple[str, str] | None = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not trusted:
        return False
    meta_name, secure_value = trusted
    header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
    value = _header(scope, header)
    return value is not None and value.split(",", 1)[0].strip() == secure_value


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """This socket's own origin, from its scheme and ``Host``; None if the host is missing
    or not one of ``ALLOWED_HOSTS``."""
    host = _header(scope, b"host")
    if host is None:
        return None
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if _is_secure(scope) else "http"
    return parse_origin(f"{scheme}://{host}")


def origin_allowed(scope: dict[str, Any]) -> bool:
    origin = _header(scope, b"origin")
    parsed = parse_origin(origin) if origin is not None else None
    if parsed is None:
        return False
    if parsed == own_origin(scope):
        return True
    return any(parsed == parse_origin(trusted) for trusted in settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware in front of the websocket stack: refuses a handshake whose origin
    is not this one (see the module docstring); lets everything else through."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
