from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "routing.audit"
    label = "audit"
    verbose_name = "Switchyard audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Start the writer with the first request a process serves.

        Not at import or ``ready()`` time: management commands (``migrate``, ``loadconfig``)
        must not subscribe to a runtime they never build. The receiver also follows a
        replaced runtime hub (``install_runtime``, tests), which costs one identity check
        per request.
        """
        from django.core.signals import request_started

        from routing.audit import writer

        request_started.connect(writer.on_request_started, dispatch_uid="switchyard-audit-writer")
