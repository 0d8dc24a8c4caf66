"""The live settings dashboard (SPEC §7): server-rendered pages, htmx for partial
updates, one Channels websocket for pushes.

::

    dashboard/
    ├── urls.py, views/      async views: staff gate (common), groups page and target
    │                        actions (groups), the policy form for a group or the global
    │                        defaults (policy), providers (providers), login (auth)
    ├── reads.py             the groups page's data: selectors + one health snapshot + calls
    ├── health.py            health badges from a state-store snapshot
    ├── chain.py             a call's attempts folded into fallback-chain steps
    ├── policy_form.py       the policy form's fields, parsing and "changed fields"
    ├── channel_names.py     the channel-layer group and message types (one place)
    ├── broadcast.py         hub events and config notices → the channel layer
    ├── notices.py           committed config writes → "*.changed" notices
    ├── consumers.py         the websocket (staff only), forwarding pushes as JSON
    └── routing.py           websocket URL patterns for router_project.asgi

Templates live in ``templates/dashboard/`` (partials via django-template-partials), the
page script and stylesheet in ``static/dashboard/``, pinned htmx in ``static/vendor/``.
"""
