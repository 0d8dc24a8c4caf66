"""Issue 10 item 8: the pooled upstream clients are closed on shutdown (no "Unclosed
client session"), through ASGI lifespan where the server speaks it."""

from __future__ import annotations

from typing import Any

from routing.gateway import runtime as runtime_module
from routing.gateway.runtime import Runtime, install_runtime, lifespan
from routing.gateway.table import ProviderSpec
from routing.state.memory import MemoryStore
from routing.upstream.openai import Timeouts


async def test_lifespan_shutdown_closes_every_pooled_client() -> None:
    previous = runtime_module.installed_runtime()
    built = Runtime(store=MemoryStore())
    install_runtime(built)
    try:
        spec = ProviderSpec(
            name="p1",
            kind="openai",
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            headers={},
            timeouts=Timeouts(),
            version=1,
        )
        client = built.client_for(spec)
        inbox: list[dict[str, Any]] = [
            {"type": "lifespan.startup"},
            {"type": "lifespan.shutdown"},
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return inbox.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await lifespan({"type": "lifespan"}, receive, send)
        assert [m["type"] for m in sent] == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]
        assert client.closed
        assert built._clients == {}
    finally:
        install_runtime(previous)
