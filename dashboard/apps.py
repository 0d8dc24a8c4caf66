from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Switchyard dashboard"

    def ready(self) -> None:
        """Turn committed configuration writes into ``*.changed`` notices for open pages.

        Call events reach :mod:`dashboard.broadcast` through the runtime, which attaches it
        to every hub it installs (``settings.SWITCHYARD["EVENT_SUBSCRIBERS"]``).
        """
        from django.conf import settings

        from dashboard import notices, stats

        notices.connect()
        stats.configure(
            failure_rate=float(settings.SWITCHYARD.get("DEGRADED_FAILURE_RATE", 0.5)),
            min_attempts=int(settings.SWITCHYARD.get("DEGRADED_MIN_ATTEMPTS", 5)),
        )
