from django.contrib import admin
from django.urls import path

from routing.api.management import api as management_api
from routing.api.openai import api as openai_api
from routing.audit.views import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", openai_api.urls),
    path("api/v1/", management_api.urls),
    path("metrics", metrics_view, name="metrics"),
]
