"""Websocket URL patterns (mounted by ``router_project.asgi``)."""

from __future__ import annotations

from django.urls import path

from dashboard import channel_names as names
from dashboard.consumers import DashboardConsumer

websocket_urlpatterns = [
    path(names.WEBSOCKET_PATH, DashboardConsumer.as_asgi(), name="dashboard-ws"),
]
