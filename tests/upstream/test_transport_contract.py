"""The transport adapter's contract with the libraries it reaches into, and its
exception table (like httpx's ``map_httpcore_exceptions`` tests).

If an upgrade of httpx, httpx-aiohttp or aiohttp changes what ``BodyReader`` or
``translate_exception`` rely on, these fail loudly: a cut stream would otherwise lose its
last bytes, or a refused connection read as a timeout, in silence.
"""

from __future__ import annotations

import asyncio
import socket

import aiohttp
import httpx
import orjson
import pytest

from routing.engine.failures import FailureCode
from routing.simulator.script import Reply
from routing.simulator.server import FakeUpstream
from routing.upstream.base import UpstreamFailure
from routing.upstream.openai import OpenAIClient
from routing.upstream.transport import WRITTEN_FOR, installed_versions, translate_exception


def test_the_installed_libraries_are_the_ones_the_adapter_was_written_for() -> None:
    assert installed_versions() == WRITTEN_FOR, (
        "routing/upstream/transport.py reaches into these libraries' private parts; "
        "check BodyReader and translate_exception against the new versions, then update "
        "WRITTEN_FOR and the pins in pyproject.toml"
    )


def caused(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        # httpx-aiohttp reports a dropped connection as a ConnectTimeout: the cause decides
        (
            caused(httpx.ConnectTimeout("x"), aiohttp.ServerDisconnectedError()),
            FailureCode.TRANSPORT,
            "connection lost during stream",
        ),
        (
            caused(httpx.ConnectTimeout("x"), aiohttp.ClientPayloadError("cut")),
            FailureCode.TRANSPORT,
            "connection lost during stream",
        ),
        (httpx.ConnectTimeout("slow"), FailureCode.TIMEOUT, "stream timeout"),
        (httpx.ReadTimeout("slow"), FailureCode.TIMEOUT, "stream timeout"),
        (TimeoutError(), FailureCode.TIMEOUT, "stream timeout"),
        (httpx.ConnectError("refused"), FailureCode.TRANSPORT, "connection failed: refused"),
        (httpx.ConnectError(""), FailureCode.TRANSPORT, "connection failed"),
        (httpx.RemoteProtocolError("x"), FailureCode.TRANSPORT, "connection lost during stream"),
        (httpx.ReadError("x"), FailureCode.TRANSPORT, "connection lost during stream"),
        (httpx.WriteError("x"), FailureCode.TRANSPORT, "connection lost during stream"),
        (
            httpx.UnsupportedProtocol("x"),
            FailureCode.TRANSPORT,
            "transport error during stream: UnsupportedProtocol",
        ),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            FailureCode.TRANSPORT,
            "network error during stream: Connection reset by peer",
        ),
        (ValueError("odd"), FailureCode.UNKNOWN, "ValueError during stream"),
    ],
)
def test_exception_table(exc: BaseException, code: FailureCode, message: str) -> None:
    failure = translate_exception(exc, phase="stream")
    assert (failure.code, failure.message) == (code, message)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_refused_connection_is_a_connection_failure_not_a_timeout() -> None:
    client = OpenAIClient(base_url=f"http://127.0.0.1:{closed_port()}/v1", api_key="k")
    try:
        with pytest.raises(UpstreamFailure) as caught:
            await client.send(b"{}")
    finally:
        await client.aclose()
    assert caught.value.failure.code is FailureCode.TRANSPORT
    assert caught.value.failure.message.startswith("connection failed")


def sse_chunk(text: str) -> bytes:
    event = b"data: " + orjson.dumps({"choices": [{"delta": {"content": text}}]}) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


async def test_a_cut_stream_hands_out_every_byte_that_came_before_the_cut() -> None:
    """What ``BodyReader`` exists for: two chunks and the cut arrive together, and
    aiohttp raises before handing them out."""

    aborted = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.read(2)  # the body ({})
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        head += b"transfer-encoding: chunked\r\n\r\n"
        writer.write(head + sse_chunk("one") + sse_chunk("two"))  # no terminating chunk
        await writer.drain()
        writer.transport.abort()  # a reset, right behind the data
        aborted.set()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAIClient(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")
    received = b""
    try:
        response = await client.send(b"{}")
        reader = response.reader()
        await aborted.wait()
        await asyncio.sleep(0.2)  # the reset reaches aiohttp before anyone reads
        with pytest.raises(UpstreamFailure) as caught:
            while chunk := await reader.read():
                received += chunk
        await response.aclose()
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert caught.value.failure.code is FailureCode.TRANSPORT
    assert b'"one"' in received and b'"two"' in received  # nothing before the cut was lost


async def test_a_whole_body_and_a_bounded_one() -> None:
    with FakeUpstream() as upstream:
        upstream.script("m", Reply(content="hello"), Reply(content="hello"))
        client = OpenAIClient(base_url=upstream.base_url, api_key="k")
        body = orjson.dumps({"model": "m", "messages": []})
        try:
            whole = await client.send(body)
            raw = await whole.read()
            await whole.aclose()
            bounded = await client.send(body)
            head = await bounded.read_limited(10)
            await bounded.aclose()
        finally:
            await client.aclose()
    assert orjson.loads(raw)["choices"][0]["message"]["content"] == "hello"
    assert head == raw[:10]


async def test_a_long_model_list_is_read_whole() -> None:
    """A provider may list thousands of models (OpenRouter): well over a megabyte."""
    names = [f"vendor-{n:05d}/" + "m" * 200 for n in range(6000)]
    with FakeUpstream(models=names) as upstream:
        client = OpenAIClient(base_url=upstream.base_url, api_key="k")
        try:
            listed = await client.model_list()
        finally:
            await client.aclose()
    assert [item["id"] for item in listed["data"]] == names


# An IP address's cookies aiohttp's default jar refuses; a named host's (every real
# provider's) it would keep and send again
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_an_upstream_s_cookies_never_go_out_with_later_calls(host: str) -> None:
    """One pooled client per provider serves every caller: a cookie an upstream sets on
    one call's answer (a CDN's, say) must not be sent with the next call, whoever makes
    it. httpx's own ``send`` would keep it in the client's jar (``Pool._send`` hands the
    request to the transport httpx would pick), and aiohttp's session under it in its
    own (``CookielessTransport``): nothing keeps it."""
    heads: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            heads.append(head.lower())
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            body = b'{"ok": true}'
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"set-cookie: __cf_bm=tenant-a; Path=/; HttpOnly\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = OpenAIClient(base_url=f"http://{host}:{port}/v1", api_key="k")
    try:
        pool = client._pool
        http = pool._client
        # the transport httpx picks for an upstream's URL is ours (no proxy configured)
        assert http._transport_for_url(httpx.URL(f"http://{host}:{port}/v1")) is http._transport
        for _ in range(2):
            response = await client.send(b"{}")
            assert response.status_code == 200
            assert response.headers["set-cookie"].startswith("__cf_bm=")  # relayed as sent
            assert await response.read() == b'{"ok": true}'
            await response.aclose()
        assert len(http.cookies) == 0
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert len(heads) == 2 and all(b"\r\ncookie:" not in head for head in heads)
    assert b"authorization: bearer k" in heads[1]  # the second call did go out, as usual
    with pytest.raises(RuntimeError, match="closed"):
        await pool.post(f"http://127.0.0.1:{port}/v1/chat/completions", b"{}")


TRACEPARENT = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}


@pytest.mark.parametrize(
    ("extra", "body", "base", "own"),
    [
        ({}, b'{"model": "m", "messages": []}', "http://127.0.0.1:9/v1", None),
        ({"x-team": "a", "authorization": "Bearer other"}, b"{}", "https://api.example/v1", None),
        ({"Host": "upstream.internal"}, b"{}", "http://127.0.0.1:9/v1", None),  # httpx's path
        ({}, b"", "http://127.0.0.1:9/v1", None),
        # a call's own headers: an attempt's traceparent, a door's protocol headers
        ({"x-team": "a"}, b"{}", "http://127.0.0.1:9/v1", TRACEPARENT),
        ({}, b"{}", "http://127.0.0.1:9/v1", {"anthropic-beta": "b1", **TRACEPARENT}),
        ({}, b"", "http://127.0.0.1:9/v1", TRACEPARENT),
    ],
)
async def test_a_request_is_the_one_httpx_s_build_request_makes(
    extra: dict[str, str], body: bytes, base: str, own: dict[str, str] | None
) -> None:
    """``Pool._request`` builds the upstream request without ``build_request``'s merging:
    the same method, URL, headers (in order), body and timeouts all the same."""
    client = OpenAIClient(base_url=base, api_key="k", headers=extra)
    try:
        pool = client._pool
        url = f"{base}/chat/completions"
        ours = pool._request(url, body, own)
        assert ours.stream is not None and b"".join(ours.stream) == body  # type: ignore[arg-type]
        theirs = pool._client.build_request("POST", url, content=body, headers=own)
        assert (ours.method, ours.url, ours.content) == (theirs.method, theirs.url, body)
        assert ours.headers.raw == theirs.headers.raw
        assert b"authorization" in [name.lower() for name, _ in ours.headers.raw]
        assert ours.extensions == theirs.extensions
        ours.headers["x-later"] = "1"
        assert "x-later" not in pool._client.headers  # a request's own headers, a copy
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "own",
    [
        {"Authorization": "Bearer per-call", **TRACEPARENT},  # replaces the client's
        {"content-length": "2"},  # frames the body: httpx's own way
    ],
)
async def test_a_call_s_own_header_replaces_the_client_s_of_that_name(own: dict[str, str]) -> None:
    """A header of the call's own whose name the client's headers have (or one that frames
    the body) is merged as ``build_request`` merges it: the call's value, once."""
    client = OpenAIClient(base_url="http://127.0.0.1:9/v1", api_key="k", headers={})
    try:
        pool = client._pool
        url = "http://127.0.0.1:9/v1/chat/completions"
        ours = pool._request(url, b"{}", own)
        theirs = pool._client.build_request("POST", url, content=b"{}", headers=own)
        assert sorted(ours.headers.multi_items()) == sorted(theirs.headers.multi_items())
        for name, value in own.items():
            assert ours.headers.get_list(name) == [value]
    finally:
        await client.aclose()
