"""The dashboard's one websocket: server → browser pushes for every open page.

Only staff users get in: the session is read by ``AuthMiddlewareStack`` and the origin
(scheme, host and port) checked by ``dashboard.origin`` (``router_project.asgi``); anyone
else is closed with code 4403 before joining the group. The one message a page sends is the calls
page's ``{"watch_calls": "<filter query string>"}``: from then on every finished call that
matches those filters (the same parser and matcher as the page's query) is also sent as
``calls.row``. Anything else from the page is ignored.

Each channel-layer message type of ``dashboard.channel_names`` has a handler here that
forwards the message as JSON with ``kind`` = its type.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import QueryDict

from dashboard import broadcast
from dashboard import channel_names as names
from dashboard.call_filters import parse_filters
from routing.audit.call_query import CallFilters

FORBIDDEN = 4403


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        # types-channels types the scope's user as AbstractBaseUser, which has no is_staff;
        # AuthMiddlewareStack puts the user model (or AnonymousUser) there, and both have it.
        if (
            user is None
            or not user.is_authenticated
            or not user.is_staff  # type: ignore[attr-defined]
            or not user.is_active
        ):
            await self.close(code=FORBIDDEN)
            return
        broadcast.remember_loop()
        broadcast.follow_hub()
        await self.channel_layer.group_add(names.GROUP, self.channel_name)
        self.joined = True
        broadcast.listener_joined()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            self.joined = False
            broadcast.listener_left()
            await self.channel_layer.group_discard(names.GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        query = content.get("watch_calls") if isinstance(content, dict) else None
        if not isinstance(query, str) or len(query) > 4000:
            return None
        filters, errors = parse_filters(QueryDict(query))
        self.call_filters = None if errors else filters
        return None

    async def _forward(self, message: dict[str, Any]) -> None:
        payload = {key: value for key, value in message.items() if key != "type"}
        await self.send_json({"kind": message["type"], **payload})

    async def health_changed(self, message: dict[str, Any]) -> None:
        await self._forward(message)

    async def call_recorded(self, message: dict[str, Any]) -> None:
        await self._forward({k: v for k, v in message.items() if k not in ("row_html", "facts")})
        filters: CallFilters | None = getattr(self, "call_filters", None)
        facts = message.get("facts")
        if filters is not None and isinstance(facts, dict) and filters.matches(facts):
            await self.send_json(
                {
                    "kind": names.CALLS_ROW,
                    "call_id": message["call_id"],
                    "html": message.get("row_html", ""),
                    "now": message.get("now"),
                }
            )

    async def group_changed(self, message: dict[str, Any]) -> None:
        await self._forward(message)

    async def provider_changed(self, message: dict[str, Any]) -> None:
        await self._forward(message)

    async def global_changed(self, message: dict[str, Any]) -> None:
        await self._forward(message)
