"""Limits, budgets and spend (SPEC §17).

::

    spec.py      Price, cost_of(); LimitSet / SessionCaps / GroupLimits compiled into the table
    windows.py   UTC calendar windows (minute, day, month): ids and reset times
    rules.py     the pure check: a call's applicable limits as counter rules, the refusal
    counters.py  where counters live: in process (LocalCounters) or Redis (redis_counters.py)
    gate.py      what a call does: admit() before any upstream, settle() when it ends
    usage.py     the reads the API and the console show (a selector: the caller passes the gate)

``spec``, ``windows`` and ``rules`` are pure, as the engine is: the standard library
only (an import contract in ``pyproject.toml`` and ``tests/test_architecture.py``).
Nothing here imports the gateway: the gateway's ``Runtime`` builds the gate, and the
refusal's 429 reply is the gateway's (``routing.gateway.refusal``). Nothing here reads the
database on the call path: limits arrive compiled in the routing table.
"""
