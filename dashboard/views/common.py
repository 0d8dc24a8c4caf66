"""What every dashboard view shares: the staff gate, the actor name, small parsers.

Views are async (the health store and the audit reads are async); services and selectors
are sync ORM code and run through ``sync_to_async`` (thread-sensitive, Django's default),
never inside the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

PAGE_PATH = "page"  # how config-change records name this write path

View = TypeVar("View", bound=Callable[..., Awaitable[HttpResponse]])


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def staff_required(view: View) -> View:
    """Only active staff users. Anonymous: full pages redirect to the login form, htmx
    requests get 401 with ``HX-Redirect`` (a fragment must never be a login page).
    Logged in but not staff: 403.

    The resolved user replaces ``request.user`` so templates rendered in the event loop
    never trigger a lazy (sync) user lookup.
    """

    @wraps(view)
    async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        user = await request.auser()
        request.user = user
        if not user.is_authenticated:
            login = f"{settings.LOGIN_URL}?next={quote(request.get_full_path())}"
            if is_htmx(request):
                return HttpResponse("Log in again.", status=401, headers={"HX-Redirect": login})
            return HttpResponseRedirect(login)
        if not (user.is_active and user.is_staff):
            return HttpResponse("The settings pages are for staff users.", status=403)
        return await view(request, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def actor(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def int_or_none(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None
