"""``FakeUpstream``: the simulator as an object a test (or a command) starts and scripts.

The aiohttp app runs on its own event loop in a daemon thread, so synchronous tests,
async tests (whose loop must stay free) and other processes can all use it over real
sockets. Scripting and inspection go through ``Ledger``, which is thread-safe.

Typical use::

    with FakeUpstream() as up:
        up.script("m", Fail(429, headers={"Retry-After": "1"}), then=Reply())
        ...  # point a client at up.base_url
        assert up.count("m") == 2
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType

from aiohttp import web

from routing.simulator.app import Upstream, build_app
from routing.simulator.azure import AzureState
from routing.simulator.script import Behaviour, Reply
from routing.simulator.state import Ledger, RecordedRequest
from routing.simulator.vertex import GoogleAuthority

_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0
_REPLY = Reply()  # frozen, so one shared default is safe


class FakeUpstream:
    """A scriptable OpenAI-compatible upstream listening on ``host:port`` (0 = any free)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        default: Behaviour = _REPLY,
        models: list[str] | None = None,
        api_key: str | None = None,
        aws_keys: dict[str, str] | None = None,
    ) -> None:
        """``aws_keys``: access key id -> secret the Bedrock routes check SigV4 with."""
        self.host = host
        self.port = port
        self._ledger = Ledger(default)
        self._upstream = Upstream(self._ledger, api_key=api_key, models=models, aws_keys=aws_keys)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://host:port/v1`` with the port actually bound (valid after ``start``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """``http://host:port``: where ``/_control/*`` lives."""
        return f"http://{self.host}:{self.port}"

    @property
    def token_uri(self) -> str:
        """The OAuth token endpoint a service-account file's ``token_uri`` names (Vertex AI)."""
        return f"http://{self.host}:{self.port}/token"

    @property
    def google(self) -> GoogleAuthority:
        """Vertex AI's identity side: ``register(client_email, public_key_pem)``, the
        ``expires_in`` of the tokens it issues, ``fetches``, ``refuse_next``, ``revoke_all()``."""
        return self._upstream.google

    def start(self) -> FakeUpstream:
        """Serve in a background thread; returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("FakeUpstream already started")
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(
            target=self._run, name=f"fake-upstream:{self.port}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("FakeUpstream did not start listening in time")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"FakeUpstream could not start: {self._error}") from self._error
        return self

    def stop(self) -> None:
        """Cancel in-flight requests, close the socket and join the thread (idempotent)."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # loop closed between the check and the call
                pass
        thread.join(_STOP_TIMEOUT_S)
        self._thread = None

    def serve_forever(self) -> None:
        """Start if needed and block the calling thread until Ctrl-C (then stop)."""
        if self._thread is None:
            self.start()
        assert self._thread is not None
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)  # a timed join keeps Ctrl-C responsive
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to start() or lost with the thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._upstream.stopping = False
        # handler_cancellation: a client that goes away cancels its handler at once, which
        # is how Silent/StallAfter/Delay notice a disconnect; a short shutdown_timeout
        # keeps stop() fast.
        runner = web.AppRunner(
            build_app(self._upstream),
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=0.5,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            self.port = runner.addresses[0][1]
            self._ready.set()
            await self._stop.wait()
            self._upstream.stopping = True
            for task in list(self._upstream.handlers):
                task.cancel()
        finally:
            await runner.cleanup()

    # -- scripting -------------------------------------------------------------------
    def script(self, model: str, *behaviours: Behaviour, then: Behaviour | None = None) -> None:
        """Replace ``model``'s queue: each request consumes the next behaviour; once
        empty, requests get ``then`` if given, else the default."""
        self._ledger.script(model, behaviours, then)

    def set_default(self, behaviour: Behaviour) -> None:
        self._ledger.set_default(behaviour)

    def use_sleep(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """What the behaviours wait with from now on (``asyncio.sleep`` until ``reset``):
        a test's virtual clock, so a scripted minute passes when the test says."""
        self._ledger.sleep = sleep

    def reset(self) -> None:
        """Clear scripts, counters and records; restore the constructor's default."""
        self._ledger.reset()
        self._upstream.azure.reset()
        self._upstream.google.reset()

    @property
    def azure(self) -> AzureState:
        """Azure's key, deployments and the tokens it issued (``routing.simulator.azure``)."""
        return self._upstream.azure

    # -- inspection ------------------------------------------------------------------
    def count(self, model: str | None = None) -> int:
        """Chat-completions requests received (for ``model``, or in total)."""
        return self._ledger.count(model)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the recorded chat-completions requests, oldest first."""
        return self._ledger.records()

    def open_requests(self) -> int:
        """Requests still being served. A request counts as ended (and is recorded as
        finished) just before its last bytes or its cut go out, so whatever a client has
        observed is already reflected here and in ``requests``."""
        return self._ledger.open_requests()

    def wait_disconnected(self, timeout: float) -> bool:
        """True once every started request has ended (answered, cut, or client gone)."""
        return self._ledger.wait_idle(timeout)
