"""Health-state stores, chosen by name or dotted path (``settings.SWITCHYARD["STATE_STORE"]``)."""

from __future__ import annotations

from django.utils.module_loading import import_string

from routing.state.base import HealthStore, Snapshot

BUILTIN_STORES = {
    "memory": "routing.state.memory.MemoryStore",
    "redis": "routing.state.redis.RedisStore",
}


def build_store(name: str, **options: object) -> HealthStore:
    """Build the store called ``name`` ("memory", "redis" or a dotted path to a HealthStore)."""
    store_class = import_string(BUILTIN_STORES.get(name, name))
    if not (isinstance(store_class, type) and issubclass(store_class, HealthStore)):
        raise TypeError(f"{name!r} is not a HealthStore")
    return store_class(**options)


__all__ = ["HealthStore", "Snapshot", "build_store"]
