"""A stand-in gateway for checking the harness itself (``python -m bench.run --stub``).

A bare ASGI app, served by daphne exactly like Switchyard, that forwards
``/v1/chat/completions`` to the bench upstream with one pooled aiohttp session: model
``bench`` -> ``fast``; ``bench-failover`` -> ``fail503`` then ``fast``. It sets
``x-switchyard-target`` / ``x-switchyard-attempts`` and, when ``REDIS_URL`` is set,
does one Redis ``INCR`` per call so ``--scale-out`` has a shared-store cost to measure.

It lets the THROUGH, scale-out and soak paths of the driver (process start, pinning,
CPU and RSS accounting, SO_REUSEPORT sharing) be verified before the real gateway
exists, and gives a floor: daphne plus the thinnest Python proxy. Its numbers are not
Switchyard's. The upstream comes from ``BENCH_STUB_UPSTREAM`` (``http://host:port/v1``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

CHAINS = {
    "bench": ["fast"],
    "bench-failover": ["fail503", "fast"],
    "bench-failover-hot": ["fail503", "fast"],
}
UPSTREAM_KEY = os.environ.get("BENCH_UPSTREAM_KEY", "bench-upstream-key")


class _Shared:
    session: aiohttp.ClientSession | None = None
    redis: Any = None


async def _session() -> aiohttp.ClientSession:
    if _Shared.session is None:
        _Shared.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False)
        )
        url = os.environ.get("REDIS_URL")
        if url:
            import redis.asyncio as redis_asyncio

            _Shared.redis = redis_asyncio.from_url(url)
    return _Shared.session


async def _json(send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]]) -> None:
    data = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/v1/models":
        await _json(send, 200, {"object": "list", "data": [{"id": k} for k in CHAINS]}, [])
        return
    request = orjson.loads(body or b"{}")
    chain = CHAINS.get(request.get("model", ""))
    if scope["path"] != "/v1/chat/completions" or chain is None:
        await _json(
            send,
            404,
            {
                "error": {
                    "message": "unknown",
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                    "param": None,
                }
            },
            [],
        )
        return
    session = await _session()
    if _Shared.redis is not None:
        await _Shared.redis.incr("bench:stub:calls")
    upstream = os.environ["BENCH_STUB_UPSTREAM"].rstrip("/") + "/chat/completions"
    for attempt, model in enumerate(chain, start=1):
        request["model"] = model
        response = await session.post(
            upstream,
            data=orjson.dumps(request),
            headers={"authorization": f"Bearer {UPSTREAM_KEY}", "content-type": "application/json"},
        )
        if response.status >= 500 and attempt < len(chain):
            await response.read()
            continue
        headers = [
            (b"content-type", response.headers.get("content-type", "").encode()),
            (b"x-switchyard-target", f"up/{model}".encode()),
            (b"x-switchyard-attempts", str(attempt).encode()),
        ]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        async for chunk in response.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        response.release()
        return
