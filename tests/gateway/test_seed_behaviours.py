"""The rest of the seeds' behaviours (issue 13 item 6) over real sockets: cancelling a call
during a backoff wait, the log lines of seed 003 §8, per-target circuit overrides and the
round-robin cursor in status."""

from __future__ import annotations

import asyncio
import logging
import threading
from contextlib import suppress

import httpx
import openai
import pytest

from routing.gateway.events import CallRecord
from routing.services.api_keys import generate_key
from routing.simulator.script import DropAfter, Fail, Reply
from tests.conftest import TWO_ROUTES, Harness

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_cancelling_during_a_backoff_wait_sends_no_further_request(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    waiting = threading.Event()

    async def parked(delay: float) -> None:  # the backoff wait, held until cancelled
        waiting.set()
        await asyncio.Event().wait()

    harness.runtime.sleep = parked  # type: ignore[attr-defined]
    harness.upstream.script("a", Fail(500, "a blinked"), then=Reply())
    async with harness.async_client() as client:
        call = asyncio.create_task(client.chat.completions.create(model="auto", messages=MESSAGES))
        assert await asyncio.to_thread(waiting.wait, 30)
        call.cancel()
        with suppress(asyncio.CancelledError):
            await call
    records = await asyncio.to_thread(harness.events, CallRecord, at_least=1, timeout=10)
    assert records and records[-1].outcome == "aborted"
    assert harness.upstream.wait_disconnected(5.0)
    assert harness.upstream.count("a") == 1 and harness.upstream.count("b") == 0


def test_log_lines_for_late_failure_surfaced_error_exhaustion_and_start_up(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="switchyard")
    harness.runtime._summarized = False  # type: ignore[attr-defined]  # a fresh process
    harness.configure(
        TWO_ROUTES.replace("    targets:", "    retry: {max_retries: 0}\n    targets:")
    )
    client = harness.client()
    client.models.list()  # the first table of this process
    assert "group auto: p1/a → p2/b; priority; no in-place retries" in caplog.text
    harness.upstream.script("a", Fail(400, "bad field"))
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="auto", messages=MESSAGES)
    harness.upstream.script("a", DropAfter(2))
    with pytest.raises(openai.APIError):
        for _ in client.chat.completions.create(model="auto", messages=MESSAGES, stream=True):
            pass
    harness.upstream.script("a", Fail(500, "a down"))
    harness.upstream.script("b", Fail(500, "b down"))
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="auto", messages=MESSAGES)
    lines = [r for r in caplog.records if r.name.startswith("switchyard")]
    late = [r for r in lines if r.getMessage().startswith("failed after content")]
    assert late and "target=p1/a code=TRANSPORT" in late[0].getMessage()
    surfaced = [r for r in lines if r.getMessage().startswith("surfaced")]
    assert surfaced and "code=BAD_REQUEST status=400" in surfaced[0].getMessage()
    exhausted = [r for r in lines if r.getMessage().startswith("exhausted")]
    assert exhausted and exhausted[0].levelno == logging.ERROR
    assert "p2/b → SERVER (HTTP 500): b down" in exhausted[0].getMessage()


def test_per_target_circuit_overrides_cool_by_their_own_rules(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "      - {provider: p1, model: a}",
            "      - {provider: p1, model: a, circuit: {failure_threshold: 2}}",
        ).replace("    targets:", "    retry: {max_retries: 0}\n    targets:")
    )
    client = harness.client()
    harness.upstream.script("a", Fail(500), Fail(500), then=Reply())
    first = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    second = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    third = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
    assert first.headers["x-switchyard-target"] == "p2/b"
    # one failure did not cool a (threshold 2): the next call tried it again
    assert second.headers["x-switchyard-trail"].startswith("p1/a:SERVER")
    # two did: the third call skips it while it cools
    assert third.headers["x-switchyard-trail"] == "p2/b:ok"
    assert harness.upstream.count("a") == 2


def test_status_shows_the_round_robin_cursor_and_the_declared_window(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "  - name: auto\n",
            "  - name: auto\n    algorithm: round-robin\n    compact_window: 500000\n",
        )
    )

    _, admin = generate_key(name="ops", kind="admin")  # the status API needs an admin key

    def status() -> dict[str, object]:
        reply = httpx.get(
            harness.gateway.url + "/api/v1/status", headers={"authorization": f"Bearer {admin}"}
        )
        assert reply.status_code == 200, reply.text
        return next(g for g in reply.json()["groups"] if g["name"] == "auto")

    assert status()["rotation"] == 0
    harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    group = status()
    assert group["rotation"] == 1
    assert (group["context_window"], group["window_source"]) == (625_000, "compact_window")
