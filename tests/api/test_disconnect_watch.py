"""The lean handler's disconnect watch (``routing.api.asgi._DisconnectWatch``): one task
beside the request's own, which cancels the request when the client leaves before its
answer is complete, and never swallows a cancellation that came from anyone else."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.exceptions import RequestAborted

from routing.api.asgi import _DisconnectWatch


class Client:
    """An ASGI ``receive`` whose disconnect the test sends (``leave``)."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def leave(self) -> None:
        self.gone.set()


async def listen(receive: Any) -> None:  # what Django's listen_for_disconnect does
    message = await receive()
    if message["type"] == "http.disconnect":
        raise RequestAborted


async def serve(client: Client, answer: asyncio.Future[str]) -> tuple[str, int]:
    """A request that waits for ``answer``, handled as ``GatewayASGIHandler.handle`` does."""
    watch = _DisconnectWatch(client.receive, listen)
    outcome = "cancelled by the client"
    try:
        outcome = await answer
    except asyncio.CancelledError:
        if watch.server_cancelled():
            raise
    finally:
        failure = watch.end()
    assert failure is None
    task = asyncio.current_task()
    assert task is not None
    return outcome, task.cancelling()


async def test_a_client_that_leaves_cancels_the_request_and_nothing_else() -> None:
    client = Client()
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    served = asyncio.create_task(serve(client, answer))
    await asyncio.sleep(0)
    client.leave()
    # cancelled, and the cancellation taken back: the handler goes on to close and return
    assert await asyncio.wait_for(served, 30) == ("cancelled by the client", 0)
    assert answer.cancelled()


async def test_an_answer_that_completes_first_stops_the_watch_without_a_cancel() -> None:
    client = Client()
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    served = asyncio.create_task(serve(client, answer))
    await asyncio.sleep(0)
    answer.set_result("answered")
    assert await served == ("answered", 0)
    client.leave()  # as daphne and uvicorn say an answer is complete: nobody listens now
    await asyncio.sleep(0)
    assert not served.cancelled()


async def test_a_cancellation_from_the_server_stays_a_cancellation() -> None:
    client = Client()
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    served = asyncio.create_task(serve(client, answer))
    await asyncio.sleep(0)
    served.cancel()  # shutdown: not the client leaving
    with pytest.raises(asyncio.CancelledError):
        await served
    client.leave()
    await asyncio.sleep(0)


async def test_a_server_cancel_stays_when_the_client_also_leaves_during_cleanup() -> None:
    client = Client()
    cleanup: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def request() -> None:
        watch = _DisconnectWatch(client.receive, listen)
        try:
            try:
                await asyncio.sleep(3600)
            finally:
                await cleanup  # the call's cleanup (an upstream's close) awaits
        except asyncio.CancelledError:
            if watch.server_cancelled():
                raise
        finally:
            watch.end()

    served = asyncio.create_task(request())
    await asyncio.sleep(0)
    served.cancel()  # shutdown
    await asyncio.sleep(0)  # the request is in its cleanup now
    client.leave()  # and its client goes too: a second cancel
    await asyncio.wait([served], timeout=30)
    assert served.cancelled()  # the server's cancel was not swallowed


async def test_a_listener_that_fails_otherwise_hands_its_error_to_raise() -> None:
    async def broken(receive: Any) -> None:
        raise OSError("the server's receive broke")

    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def request() -> BaseException | None:
        watch = _DisconnectWatch(Client().receive, broken)
        try:
            await answer
        except asyncio.CancelledError:
            assert watch.cancelled
        return watch.end()

    failure = await asyncio.create_task(request())
    assert isinstance(failure, OSError) and "broke" in str(failure)
