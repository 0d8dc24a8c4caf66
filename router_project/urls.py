from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic.base import RedirectView

import routing.api.doors  # noqa: F401  (registers /v1/messages, /v1/responses, /v1/embeddings)
from dashboard.views.auth import LoginView, LogoutView
from routing.api import gemini
from routing.api.management import api as management_api
from routing.api.management import unknown_path as unknown_management_path
from routing.api.openai import api as openai_api
from routing.api.openai import unknown_endpoint
from routing.api.probes import healthz, readyz
from routing.audit.views import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    # Gemini's door: the model and the action in the path, under /v1beta and /v1 (SPEC §20)
    re_path(
        r"^(?P<version>v1beta|v1)/models/(?P<model>[^:]+):(?P<action>[A-Za-z]+)$",
        gemini.model_action,
    ),
    re_path(r"^(?P<version>v1beta)/models/?$", gemini.list_models),
    re_path(r"^v1/models/?$", gemini.v1_models),
    re_path(r"^(?P<version>v1beta|v1)/models/(?P<model>[^:]+)$", gemini.get_model),
    re_path(r"^v1beta/(?P<rest>.*)$", gemini.unknown_endpoint),
    path("v1/", openai_api.urls),
    re_path(r"^v1/(?P<rest>.*)$", unknown_endpoint),
    path("api/v1/", management_api.urls),
    re_path(r"^api/v1/(?P<rest>.*)$", unknown_management_path),
    path("api/docs", RedirectView.as_view(url="/api/v1/docs")),
    path("metrics", metrics_view, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", LogoutView.as_view(), name="logout"),
    path("", include("dashboard.urls")),
]
