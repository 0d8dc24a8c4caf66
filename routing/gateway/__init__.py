"""The gateway's core: what happens between a client's request and its reply.

::

    routing/gateway/
    ├── runtime.py    the process's state: routing table, health store, pooled upstream
    │                 clients, event hub, and the injected clock/sleep/random seams
    ├── table.py      the routing table compiled from the database (never read per call)
    ├── sync.py       how every process follows a configuration change within a second
    ├── call.py       one call: choose (routing.engine.select), attempt, retry, switch,
    │                 commit, relay, exhaust
    ├── attempt.py    one upstream attempt up to the commit point, and the stream reader
    ├── count.py      count_tokens: a target's own count, else an estimate (not a call)
    ├── continuity.py history rewriting for the target now chosen (SPEC §13)
    ├── checker.py    active health checks of cooling targets, off the client's path
    ├── explain.py    route/explain: the next call's choice, from reads only
    ├── events.py     what a call publishes, and the hub that fans it out
    ├── replies.py    values the front doors turn into HTTP
    └── limits.py     the process's open-file limit and upstream pool size

Decisions live in ``routing.engine`` (pure); I/O to upstreams in ``routing.upstream``;
records and metrics subscribe to the event hub (``routing.audit``,
``routing.observability``).
"""
