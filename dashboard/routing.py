"""Websocket URL patterns (mounted by ``router_project.asgi``)."""

from __future__ import annotations

from django.urls import path

from dashboard import channel_names as names
from dashboard.consumers import DashboardConsumer

# Channels routes ASGI apps through Django's path(); django-stubs types its view as an HTTP
# view and types-channels wants its own pattern type, so the stubs disagree (not the code).
websocket_urlpatterns = [
    path(names.WEBSOCKET_PATH, DashboardConsumer.as_asgi(), name="dashboard-ws"),  # type: ignore[arg-type]
]
