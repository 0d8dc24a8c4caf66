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
        from dashboard import notices, stats
        from routing.conf import switchyard_settings

        notices.connect()
        conf = switchyard_settings()
        stats.configure(
            failure_rate=conf.DEGRADED_FAILURE_RATE, min_attempts=conf.DEGRADED_MIN_ATTEMPTS
        )
