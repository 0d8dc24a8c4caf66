"""Login for the dashboard: Django's own views, with the admin's staff-only form."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views


class LoginView(auth_views.LoginView):
    """Refuses non-staff accounts at the door (the same form the Django admin uses)."""

    authentication_form = AdminAuthenticationForm
    template_name = "registration/login.html"
    redirect_authenticated_user = False


class LogoutView(auth_views.LogoutView):
    next_page = "login"
