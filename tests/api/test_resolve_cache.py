"""The lean handler keeps Django's resolution of each ``/v1`` path
(``routing.api.asgi.GatewayASGIHandler.resolve_request``): the same match as Django's, the
URLconf walked once per path, never a kept miss, and nothing kept across a URLconf reload."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory
from django.urls import Resolver404, clear_url_caches, get_resolver

from routing.api import asgi
from routing.api.asgi import GatewayASGIHandler


class Counting:
    """Counts the URLconf's root resolver's ``resolve`` calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        resolver = get_resolver()
        real = resolver.resolve

        def resolve(path: str) -> Any:
            self.calls += 1
            return real(path)

        monkeypatch.setattr(resolver, "resolve", resolve)


def request(path: str) -> Any:
    return RequestFactory().post(path, data=b"{}", content_type="application/json")


def test_a_path_is_resolved_once_and_matches_as_django_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = GatewayASGIHandler()
    counting = Counting(monkeypatch)
    first = request("/v1/chat/completions")
    match = handler.resolve_request(first)
    assert first.resolver_match is match
    django = get_resolver().resolve("/v1/chat/completions")
    assert (match.func, match.args, match.kwargs, match.url_name) == (
        django.func,
        django.args,
        django.kwargs,
        django.url_name,
    )
    counting.calls = 0
    second = request("/v1/chat/completions")
    assert handler.resolve_request(second) is match
    assert second.resolver_match is match
    assert counting.calls == 0  # the URLconf was not walked again
    handler.resolve_request(request("/v1/messages"))
    assert counting.calls == 1  # another path is its own


def test_a_miss_is_django_s_404_and_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = GatewayASGIHandler()
    counting = Counting(monkeypatch)
    for _ in range(2):
        with pytest.raises(Resolver404):
            handler.resolve_request(request("/nowhere/at-all"))
    assert counting.calls == 2
    assert "/nowhere/at-all" not in handler._matches


def test_nothing_is_kept_across_a_urlconf_reload_and_the_kept_paths_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = GatewayASGIHandler()
    before = handler.resolve_request(request("/v1/chat/completions"))
    clear_url_caches()  # what Django does when ROOT_URLCONF changes
    after = handler.resolve_request(request("/v1/chat/completions"))
    assert after is not before and after.func == before.func
    # Under /v1 every path resolves (an unknown one to the OpenAI-shaped 404's view), so a
    # client choosing paths must not grow what is kept
    monkeypatch.setattr(asgi, "MATCHES_KEPT", 2)
    for n in range(5):
        handler.resolve_request(request(f"/v1/no-such-door-{n}"))
    assert 0 < len(handler._matches) <= 2
