from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Switchyard routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from routing import signals

        signals.connect()
