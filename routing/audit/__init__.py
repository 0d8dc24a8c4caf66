"""The audit trail: durable records of calls, switches, health and configuration changes.

Nothing here runs on the request path. The call path publishes events to the runtime's
``EventHub``; :mod:`routing.audit.writer` queues them in memory and a background thread
writes them in batches; :mod:`routing.observability.metrics` counts them for Prometheus. Reads go
through :mod:`routing.audit.selectors` (records) and :mod:`routing.observability.status` (live
health). Config writers call :func:`routing.audit.services.config_change_record`.
"""
