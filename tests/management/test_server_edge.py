"""The server edge (issue 37, SPEC §9): what a request may cost before it is known to be
wanted, on a real gateway process under each server ``serve`` runs (``server_command``:
daphne through ``routing.management.daphne_edge``, and uvicorn), over real sockets.

- a body over ``SWITCHYARD_MAX_BODY_BYTES`` is refused from its ``Content-Length`` before it
  is sent, and while it arrives when it has no length;
- a ``/v1`` request without a known key gets the door's 401 before its body is sent;
- (daphne) headers over 16 KB get a 431; a request that does not arrive within
  ``SWITCHYARD_REQUEST_READ_TIMEOUT_S`` (2 s here) gets a 408 however it trickles;
- a client that stops reading a stream stops the upstream: what the upstream managed to
  send stays bounded, and the whole stream still arrives once the client reads again;
- keys in a query string are written to the access log as ``[scrubbed]``.

"Before it is sent" is literal: the client sends the headers only and waits for the answer;
a server that waits for the body never answers (the wait is generous, the answer prompt).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from routing.management.workers import server_command

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
ANSWER_TIMEOUT_S = 60.0  # generous: the answer is prompt, a server waiting for a body never answers
READ_TIMEOUT_S = 2  # the gateways' SWITCHYARD_REQUEST_READ_TIMEOUT_S
LIMIT = 1024 * 1024  # the gateways' SWITCHYARD_MAX_BODY_BYTES
PIECE = 8 * 1024  # content characters per upstream stream chunk
STREAM_BYTES = 64 * 1024 * 1024  # of content, in the big stream
SERVERS = ("daphne", "uvicorn")
pytestmark = pytest.mark.multiprocess


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class CountingUpstream:
    """An OpenAI-compatible upstream whose streamed answer is ``STREAM_BYTES`` of ``~``,
    counting what it managed to send (what its socket accepted: aiohttp's ``write`` waits
    while its buffer is over the high-water mark)."""

    port: int = field(default_factory=free_port)
    sent: int = 0
    finished: bool = False
    loop: asyncio.AbstractEventLoop | None = None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response(_completion("ok"))
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if sock is not None:  # a small kernel buffer: what was sent is what left the process
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        event = _event({"content": "~" * PIECE}, None)
        for _ in range(STREAM_BYTES // PIECE):
            await response.write(event)
            self.sent += PIECE
        await response.write(_event({}, "stop") + b"data: [DONE]\n\n")
        self.finished = True
        await response.write_eof()
        return response

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "big", "object": "model"}]})

    def start(self) -> None:
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self.chat)
            app.router.add_get("/v1/models", self.models)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self.loop = asyncio.get_running_loop()
            ready.set()
            await asyncio.Event().wait()

        threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
        assert ready.wait(START_TIMEOUT_S)


def _event(delta: dict[str, str], finish: str | None) -> bytes:
    chunk = {
        "id": "chatcmpl-edge",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "big",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _completion(text: str) -> dict[str, object]:
    return {
        "id": "chatcmpl-edge",
        "object": "chat.completion",
        "created": 0,
        "model": "big",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


CONFIG = """
providers:
  - name: counting
    kind: openai
    base_url: http://127.0.0.1:{port}/v1
    api_key: upstream-key
    models: [big]
groups:
  - name: big
    targets:
      - {{provider: counting, model: big}}
"""


@dataclass
class Gateway:
    server: str
    port: int
    key: str
    log: Path
    process: subprocess.Popen[bytes]

    def connect(self, rcvbuf: int | None = None) -> socket.socket:
        sock = socket.socket()
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(ANSWER_TIMEOUT_S)
        sock.connect(("127.0.0.1", self.port))
        return sock


@dataclass
class Installation:
    env: dict[str, str]
    tmp: Path
    upstream: CountingUpstream
    key: str
    gateways: dict[str, Gateway] = field(default_factory=dict)

    def gateway(self, server: str) -> Gateway:
        if server not in self.gateways:
            self.gateways[server] = self._start(server)
        return self.gateways[server]

    def _start(self, server: str) -> Gateway:
        port = free_port()
        log = self.tmp / f"{server}.log"
        command = server_command(
            server, "router_project.asgi:application", host="127.0.0.1", port=port, backlog=64
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, f"{server} exited:\n{log.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, f"{server} did not listen:\n{log.read_text()}"
                time.sleep(0.1)
        return Gateway(server, port, self.key, log, process)

    def stop(self) -> None:
        for gateway in self.gateways.values():
            gateway.process.terminate()
        for gateway in self.gateways.values():
            try:
                gateway.process.wait(15)
            except subprocess.TimeoutExpired:
                gateway.process.kill()
                gateway.process.wait(15)


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    tmp = tmp_path_factory.mktemp("edge")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
        and not k.startswith("SWITCHYARD_")
    }
    env.update(
        SWITCHYARD_VAR_DIR=str(tmp / "var"),
        SWITCHYARD_MAX_BODY_BYTES=str(LIMIT),
        SWITCHYARD_REQUEST_READ_TIMEOUT_S=str(READ_TIMEOUT_S),
        SWITCHYARD_HEALTH_CHECK_S="0",
        PYTHONUNBUFFERED="1",
    )
    upstream = CountingUpstream()
    upstream.start()
    config = tmp / "switchyard.yaml"
    config.write_text(CONFIG.format(port=upstream.port))

    def manage(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert result.returncode == 0, f"manage.py {args}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    manage("migrate", "--verbosity", "0")
    manage("loadconfig", str(config))
    key = manage("createkey", "edge").strip().splitlines()[-1]
    inst = Installation(env, tmp, upstream, key)
    try:
        yield inst
    finally:
        inst.stop()


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the one answer on ``sock`` (read to its end)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed without an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    length = int(headers.get("content-length", "-1"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


CHAT = "/v1/chat/completions"


def post_head(path: str, length: int | None, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode()


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("path", ["/healthz", "/api/v1/providers", "/"])
def test_a_body_declared_over_the_limit_is_refused_before_it_is_sent(
    installation: Installation, server: str, path: str
) -> None:
    gateway = installation.gateway(server)
    with gateway.connect() as sock:
        sock.sendall(post_head(path, 600 * 1024 * 1024))
        status, headers, body = answer(sock)
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "request_too_large"
    assert headers["connection"] == "close"


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize(
    ("length", "auth"),
    [
        (LIMIT // 2, ""),  # within the limit, no key
        (LIMIT // 2, "Authorization: Bearer sk-not-a-key-of-this-gateway"),
        (200 * 1024 * 1024, ""),  # over the limit too: the key is checked first
    ],
    ids=["no-key", "unknown-key", "no-key-over-limit"],
)
def test_v1_without_a_known_key_gets_the_doors_401_before_its_body_is_sent(
    installation: Installation, server: str, length: int, auth: str
) -> None:
    gateway = installation.gateway(server)
    with gateway.connect() as sock:
        sock.sendall(post_head(CHAT, length, *([auth] if auth else [])))
        status, headers, body = answer(sock)
    assert status == 401, body
    assert json.loads(body)["error"]["code"] in ("missing_api_key", "invalid_api_key")
    assert headers["connection"] == "close"


@pytest.mark.parametrize("server", SERVERS)
def test_a_known_key_over_the_limit_gets_the_doors_413_before_its_body_is_sent(
    installation: Installation, server: str
) -> None:
    gateway = installation.gateway(server)
    with gateway.connect() as sock:
        sock.sendall(post_head(CHAT, LIMIT + 1, f"Authorization: Bearer {gateway.key}"))
        status, _, body = answer(sock)
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "request_too_large"


@pytest.mark.parametrize("server", SERVERS)
def test_a_body_without_a_length_is_refused_once_it_passes_the_limit(
    installation: Installation, server: str
) -> None:
    gateway = installation.gateway(server)
    piece = b"x" * 65536
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    with gateway.connect() as sock:
        sock.sendall(post_head(CHAT, None, f"Authorization: Bearer {gateway.key}"))
        sent = 0
        try:
            while sent <= 4 * LIMIT:  # never ends by itself; the answer must stop it
                sock.sendall(chunk)
                sent += len(piece)
        except OSError:  # the gateway stopped reading and closed: the answer is there
            pass
        status, headers, body = answer(sock)
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "request_too_large"


def test_a_body_within_the_limit_is_still_served(installation: Installation) -> None:
    for server in SERVERS:
        gateway = installation.gateway(server)
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=ANSWER_TIMEOUT_S)
        payload = {"model": "big", "messages": [{"role": "user", "content": "y" * (LIMIT // 2)}]}
        connection.request(
            "POST", CHAT, body=json.dumps(payload),
            headers={"Authorization": f"Bearer {gateway.key}", "Content-Type": "application/json"},
        )  # fmt: skip
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
        assert response.status == 200, (server, body)
        assert body["choices"][0]["message"]["content"] == "ok"


@pytest.mark.parametrize(
    "headers",
    [
        ["X-Big: " + "a" * 20_000],  # one line over 16 KB: the connection used to just close
        [f"X-Many-{i}: " + "a" * 1000 for i in range(20)],  # 20 KB in all: a bare 400 before
    ],
    ids=["one-long-line", "many-lines"],
)
def test_daphne_answers_headers_over_16_kb_with_431(
    installation: Installation, headers: list[str]
) -> None:
    gateway = installation.gateway("daphne")
    with gateway.connect() as sock:
        sock.sendall(
            ("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "\r\n".join(headers)).encode()
            + b"\r\n\r\n"
        )
        status, headers_, body = answer(sock)
    assert status == 431, body
    assert json.loads(body)["error"]["code"] == "request_header_fields_too_large"
    assert headers_["connection"] == "close"


def test_daphne_answers_a_trickling_request_408_at_its_deadline(
    installation: Installation,
) -> None:
    """One byte of the request every 0.2 s: every byte used to restart Twisted's timeout, so
    the connection was held for ever; the whole request now has READ_TIMEOUT_S."""
    gateway = installation.gateway("daphne")
    request = b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"
    request += b"x" * 100_000
    with gateway.connect() as sock:
        sock.settimeout(0.2)  # the pace of the trickle: a wait for the answer, not a sleep
        started = time.monotonic()
        data = b""
        for byte in request:
            assert time.monotonic() - started < ANSWER_TIMEOUT_S, "no answer: never timed out"
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break  # closed after the answer
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            break
        sock.settimeout(ANSWER_TIMEOUT_S)
        while data and b"\r\n\r\n" not in data:
            data += sock.recv(65536)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert time.monotonic() - started >= READ_TIMEOUT_S * 0.9


def test_daphne_closes_a_connection_that_sends_nothing_at_its_deadline(
    installation: Installation,
) -> None:
    gateway = installation.gateway("daphne")
    with gateway.connect() as sock:
        assert sock.recv(1) == b""  # closed by the gateway (a generous recv timeout)


@pytest.mark.parametrize("server", SERVERS)
def test_a_client_that_stops_reading_a_stream_stops_the_upstream(
    installation: Installation, server: str
) -> None:
    """The client reads the response's head, then nothing: the gateway must stop reading the
    upstream once its own buffers are full. Measured by what the upstream managed to send,
    polled until it stops growing (or the whole stream is sent: the bug). Then the client
    reads, and the whole stream arrives, nothing lost."""
    upstream = installation.upstream
    upstream.sent, upstream.finished = 0, False
    gateway = installation.gateway(server)
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=ANSWER_TIMEOUT_S)
    connection.sock = gateway.connect(rcvbuf=32 * 1024)
    payload = {"model": "big", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    connection.request(
        "POST", CHAT, body=json.dumps(payload),
        headers={"Authorization": f"Bearer {gateway.key}", "Content-Type": "application/json"},
    )  # fmt: skip
    response = connection.getresponse()
    assert response.status == 200
    started = time.monotonic()
    last, steady_since = -1, time.monotonic()
    while not upstream.finished and time.monotonic() - steady_since < 2.0:
        assert time.monotonic() - started < ANSWER_TIMEOUT_S
        if upstream.sent != last:
            last, steady_since = upstream.sent, time.monotonic()
        time.sleep(0.05)
    held = upstream.sent
    assert not upstream.finished and held < STREAM_BYTES // 2, (
        f"the upstream sent {held} of {STREAM_BYTES} bytes to a client that read none"
    )
    received = response.read()
    connection.close()
    assert received.count(b"~") == STREAM_BYTES
    assert received.rstrip().endswith(b"data: [DONE]")
    assert upstream.finished


def test_keys_in_a_query_string_are_scrubbed_from_the_access_log(
    installation: Installation,
) -> None:
    secret = "AIzaSECRET-IN-THE-QUERY-1234"
    for server in SERVERS:
        gateway = installation.gateway(server)
        connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=ANSWER_TIMEOUT_S)
        connection.request(
            "GET", f"/v1/models?key={secret}&api_key={secret}&access_token={secret}&x=1"
        )
        response = connection.getresponse()
        response.read()
        connection.close()
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while "/v1/models?" not in gateway.log.read_text():
            assert time.monotonic() < deadline, f"no access log line in:\n{gateway.log.read_text()}"
            time.sleep(0.05)
        log = gateway.log.read_text()
        assert secret not in log, (server, log)
        assert "key=[scrubbed]&api_key=[scrubbed]&access_token=[scrubbed]&x=1" in log, (server, log)
