from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Switchyard dashboard"

    def ready(self) -> None:
        """Connect receivers only: the runtime (and its hub) is built later, on first use.

        ``request_started`` keeps :mod:`dashboard.broadcast` subscribed to the current hub
        (one identity check per request); the model signals turn committed configuration
        writes into ``*.changed`` notices for open pages.
        """
        from django.core.signals import request_started

        from dashboard import broadcast, notices

        request_started.connect(
            broadcast.on_request_started, dispatch_uid="switchyard-dashboard-hub"
        )
        notices.connect()
