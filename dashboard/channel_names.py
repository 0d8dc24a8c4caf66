"""The one place that names the dashboard's channel-layer group and message types.

Every open dashboard page holds one websocket (``dashboard.consumers.DashboardConsumer``)
in the group :data:`GROUP`. Producers (``dashboard.broadcast``) send a message whose
``type`` is one of the constants below; Channels dispatches it to the consumer method of
the same name with dots turned into underscores (``"health.changed"`` →
``health_changed``), which forwards it to the browser as JSON with ``kind`` set to the
same string. ``static/dashboard/dashboard.js`` switches on that ``kind``.

Messages (every one carries ``now``: the server clock in epoch seconds, so the browser
can correct its countdowns for clock skew):

- ``health.changed`` — ``badges``: ``{"provider/model": "<badge html>"}``, the fresh badge of
  every target whose health changed.
- ``call.recorded`` — ``group``, ``call_id``, ``html``: one finished call of a group, rendered
  as a row of the fallback chain panel; ``row_html``: the same call as a row of the calls
  page; ``facts``: what the calls page's filters match on (``routing.audit.call_query``).
  A socket whose page registered calls filters also gets ``calls.row`` (``call_id``,
  ``html``) for each call that matches them.
- ``group.changed`` — ``name``, ``version`` (``0`` when deleted): a group's configuration was
  committed; pages showing an older version raise the conflict banner.
- ``provider.changed`` — ``name``, ``version`` (``0`` when deleted).
- ``global.changed`` — ``version``: the global policy defaults changed.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "switchyard.dashboard"

HEALTH_CHANGED: Final = "health.changed"
CALL_RECORDED: Final = "call.recorded"
GROUP_CHANGED: Final = "group.changed"
PROVIDER_CHANGED: Final = "provider.changed"
GLOBAL_CHANGED: Final = "global.changed"

MESSAGE_TYPES: Final = (
    HEALTH_CHANGED,
    CALL_RECORDED,
    GROUP_CHANGED,
    PROVIDER_CHANGED,
    GLOBAL_CHANGED,
)

CALLS_ROW: Final = "calls.row"  # consumer → browser only (after filtering per socket)

WEBSOCKET_PATH: Final = "ws/dashboard/"
