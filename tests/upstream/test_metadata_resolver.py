"""A name that resolves to a cloud metadata address is refused when connecting (issue 37
item 6: DNS rebinding — the schema judged the name when it was written, the address it
resolves to now is judged here), over a real aiohttp connector and loopback sockets."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import httpx
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from routing.engine.failures import FailureCode
from routing.simulator.server import FakeUpstream
from routing.upstream.transport import (
    CookielessTransport,
    MetadataRefusingResolver,
    translate_exception,
)


class FakeDNS(AbstractResolver):
    """Names to addresses, as a rebinding DNS server would answer them."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": family,
                "proto": 0,
                "flags": 0,
            }
            for address in self.names[host]
        ]

    async def close(self) -> None:
        pass


def test_the_resolver_drops_metadata_addresses_and_refuses_a_name_left_with_none() -> None:
    dns = FakeDNS(
        {
            "rebound.test": ["169.254.169.254"],
            "mapped.test": ["::ffff:169.254.169.254", "fd00:ec2::254"],
            "mixed.test": ["169.254.169.254", "127.0.0.1"],
        }
    )
    resolver = MetadataRefusingResolver(dns)
    for name in ("rebound.test", "mapped.test"):
        with pytest.raises(OSError, match=f"{name} resolves to a cloud metadata address"):
            asyncio.run(resolver.resolve(name, 80))
    kept = asyncio.run(resolver.resolve("mixed.test", 80))
    assert [result["host"] for result in kept] == ["127.0.0.1"]


def test_a_connection_to_a_rebound_name_is_refused_and_a_local_one_is_served() -> None:
    with FakeUpstream(models=["m"]) as upstream:
        port = int(upstream.base_url.split(":")[2].split("/")[0])
        dns = FakeDNS({"local.test": ["127.0.0.1"], "rebound.test": ["169.254.169.254"]})

        async def fetch(name: str) -> int:
            connector = aiohttp.TCPConnector(resolver=MetadataRefusingResolver(dns))
            async with aiohttp.ClientSession(connector=connector) as session:
                async with session.get(f"http://{name}:{port}/v1/models") as response:
                    return response.status

        assert asyncio.run(fetch("local.test")) == 200
        with pytest.raises(aiohttp.ClientConnectorError) as refused:
            asyncio.run(fetch("rebound.test"))
    wrapped = httpx.ConnectTimeout("x")
    wrapped.__cause__ = refused.value
    failure = translate_exception(wrapped, phase="connect")
    assert failure.code is FailureCode.TRANSPORT
    assert "rebound.test resolves to a cloud metadata address" in failure.message


def test_every_provider_pool_connects_through_that_resolver() -> None:
    """Contract: the transport's own session uses it (aiohttp keeps it as ``_resolver``)."""

    async def resolver_of_the_session() -> object:
        session = CookielessTransport().get_client()
        try:
            return session.connector._resolver  # type: ignore[union-attr]
        finally:
            await session.close()

    assert isinstance(asyncio.run(resolver_of_the_session()), MetadataRefusingResolver)
