"""ASGI entry point: HTTP goes to Django, websockets to the dashboard's consumers.

The websocket stack checks that the ``Origin`` header is this origin — scheme, host and
port (``dashboard.origin``) — and reads the Django session, so only pages served by this
gateway, to a logged-in user, get in (the consumer itself then insists on a staff user).

Static files (the vendored htmx and the dashboard's script and stylesheet) are served by
Django's ``ASGIStaticFilesHandler``: a handful of small files for one settings page, so a
separate static server is not worth requiring for a self-hosted gateway. It only looks at
paths under ``STATIC_URL``; every other request goes straight to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "router_project.settings")
django_asgi_app = get_asgi_application()

from routing.gateway.limits import raise_open_file_limit, tune_garbage_collection  # noqa: E402
from routing.gateway.sync import start_listener, start_watcher  # noqa: E402

raise_open_file_limit()  # two files per open stream: as many as the system allows
start_watcher()  # any process's config change reaches this one within CONFIG_CHECK_S
start_listener()  # with REDIS_URL: at once, over pub/sub

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

import dashboard.routing  # noqa: E402
from dashboard.origin import SameOriginValidator  # noqa: E402
from routing.api.asgi import split_gateway_traffic  # noqa: E402
from routing.api.edge import scrub_access_log  # noqa: E402
from routing.gateway.runtime import close_on_twisted_shutdown, lifespan  # noqa: E402

close_on_twisted_shutdown()  # daphne: pooled upstream clients are closed at shutdown
scrub_access_log()  # uvicorn: no key sent in a query string reaches its access log

# /v1 goes to a handler without the page's sync middleware (see routing.api.asgi).
application = split_gateway_traffic(
    ProtocolTypeRouter(
        {
            "http": ASGIStaticFilesHandler(django_asgi_app),
            "lifespan": lifespan,  # uvicorn & co.: the same close at shutdown
            "websocket": SameOriginValidator(
                # path() patterns, which types-channels does not accept (see dashboard.routing)
                AuthMiddlewareStack(URLRouter(dashboard.routing.websocket_urlpatterns))  # type: ignore[arg-type]
            ),
        }
    )
)
tune_garbage_collection()  # after everything the process keeps for its life was made
