"""ASGI entry point: HTTP goes to Django, websockets to the dashboard's consumers."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "router_project.settings")
django_asgi_app = get_asgi_application()

from routing.sync import start_listener  # noqa: E402

start_listener()  # with REDIS_URL: other processes' config changes invalidate our table

from channels.routing import ProtocolTypeRouter  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app})
