from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Switchyard routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from routing import checks, signals  # noqa: F401  (checks register on import)

        signals.connect()
