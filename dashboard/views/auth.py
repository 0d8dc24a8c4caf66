"""Login for the dashboard: Django's own views, with the admin's staff-only form.

Both this login and the admin's are guarded by django-axes (settings: ``AXES_*``): a
username that failed ``AXES_FAILURE_LIMIT`` times from one address is refused there, the
right password included, until the cool-off passes; :func:`locked_out` is the page it gets.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

TOO_MANY_REQUESTS = 429


class LoginView(auth_views.LoginView):
    """Refuses non-staff accounts at the door (the same form the Django admin uses)."""

    authentication_form = AdminAuthenticationForm
    template_name = "registration/login.html"
    redirect_authenticated_user = False


class LogoutView(auth_views.LogoutView):
    next_page = "login"


def client_address(request: HttpRequest) -> str | None:
    """The address a lockout is counted against (``AXES_CLIENT_IP_CALLABLE``): the peer's,
    never a client-supplied ``X-Forwarded-For`` (else every try could claim a new one). Behind
    a reverse proxy that is the proxy's, unless the server is told the client's address."""
    address: str | None = request.META.get("REMOTE_ADDR")
    return address


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any
) -> HttpResponse:
    """The answer to a login attempt while its username and address are locked out
    (``AXES_LOCKOUT_CALLABLE``): a page that says so and for how long, with 429."""
    minutes = settings.AXES_COOLOFF_TIME.total_seconds() / 60
    context = {"failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": f"{minutes:g}"}
    return render(request, "registration/locked_out.html", context, status=TOO_MANY_REQUESTS)
