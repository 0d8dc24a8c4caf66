"""Limits, budgets and spend (SPEC §17).

::

    spec.py      Price, cost_of(); LimitSet / SessionCaps / GroupLimits compiled into the table
    windows.py   UTC calendar windows (minute, day, month): ids and reset times
    rules.py     the pure check: a call's applicable limits as counter rules, the refusal
    counters.py  where counters live: in process (LocalCounters) or Redis (redis_counters.py)
    gate.py      what a call does: admit() before any upstream, settle() when it ends
    refusal.py   a refusal as the door's 429 (ErrorReply)

Nothing here reads the database: limits arrive compiled in the routing table.
"""
