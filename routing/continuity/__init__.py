"""Conversation continuity across a switch (SPEC §13), as pure functions.

A session can move between targets (a failover, a cooled target, a reorder). The gateway
remembers which target produced each assistant turn it served (``provenance``), and
rewrites only the *outbound copy* of a request's history for the target now chosen
(``rewrite``), through a protocol-neutral view of the messages (``history``; the Chat
Completions view is ``chat``). ``effort`` is the per-target reasoning-effort policy and
``window`` the declared context window. Nothing here imports Django or does I/O.
"""
