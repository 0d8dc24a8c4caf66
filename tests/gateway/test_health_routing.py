"""Health that remembers, seen from the outside: cooling, probing, credential isolation,
algorithms and affinity, driven through the real gateway with a hand-moved clock."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass

import httpx
import openai
import pytest

from routing.engine.health import Availability, availability
from routing.simulator.script import Delay, Fail, Reply, Silent
from tests.conftest import TWO_ROUTES, Harness

MESSAGES = [{"role": "user", "content": "hi"}]


@dataclass
class FakeClock:
    now: float

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(harness: Harness) -> FakeClock:
    fake = FakeClock(time.time())
    harness.runtime.clock = fake
    yield fake
    harness.runtime.clock = time.time


def served_by(h: Harness, **kwargs: object) -> str:
    raw = h.client().chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES, **kwargs
    )
    return raw.headers["x-switchyard-target"]


async def burst(h: Harness, n: int, **body: object) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=n)) as client:
        return await asyncio.gather(
            *(
                client.post(
                    h.gateway.base_url + "/chat/completions",
                    headers={"authorization": f"Bearer {h.key}"},
                    json={"model": "auto", "messages": MESSAGES, **body},
                )
                for _ in range(n)
            )
        )


async def test_cooling_target_is_skipped_and_then_probed_by_exactly_one_call(
    harness: Harness, clock: FakeClock
) -> None:
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n")
    )
    harness.upstream.script("a", Fail(503))
    assert served_by(harness) == "p2/b"  # a fails once: threshold 1 → cooling for 10 s
    health = (await harness.runtime.store.snapshot(["p1/a"], ["p1"])).targets["p1/a"]
    assert availability(health, clock.now) is Availability.COOLING
    assert health.until == pytest.approx(clock.now + 10, abs=0.5)

    harness.upstream.script("a", then=Delay(0.5, Reply()))
    responses = await burst(harness, 50)
    assert all(r.status_code == 200 for r in responses)
    assert harness.upstream.count("a") == 1  # only the failed call ever reached it

    clock.advance(11)  # cooling over: probe-eligible
    responses = await burst(harness, 50)
    assert all(r.status_code == 200 for r in responses)
    targets = Counter(r.headers["x-switchyard-target"] for r in responses)
    assert targets["p1/a"] == 1, targets  # exactly one probe while the others kept skipping
    assert harness.upstream.count("a") == 2
    health = (await harness.runtime.store.snapshot(["p1/a"], ["p1"])).targets.get("p1/a")
    assert health is None or availability(health, clock.now) is Availability.AVAILABLE


async def test_failed_probe_cools_again_for_twice_as_long(
    harness: Harness, clock: FakeClock
) -> None:
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n")
    )
    harness.upstream.script("a", then=Fail(503))
    served_by(harness)
    clock.advance(11)
    assert served_by(harness) == "p2/b"  # the probe failed on a, b answered
    assert harness.upstream.count("a") == 2
    health = (await harness.runtime.store.snapshot(["p1/a"], ["p1"])).targets["p1/a"]
    assert health.until == pytest.approx(clock.now + 20, abs=0.5)


def test_a_401_disables_every_target_of_that_provider_until_re_enabled(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "      - {provider: p2, model: b}",
            "      - {provider: p1, model: c}\n      - {provider: p2, model: b}",
        )
    )
    harness.upstream.script("a", Fail(401, "invalid api key"))
    assert served_by(harness) == "p2/b"  # a → AUTH disables p1, so p1/c is skipped too
    for _ in range(5):
        assert served_by(harness) == "p2/b"
    assert harness.upstream.count("a") == 1 and harness.upstream.count("c") == 0

    from asgiref.sync import async_to_sync

    async_to_sync(harness.runtime.store.enable_provider)("p1", time.time(), by="test")
    assert served_by(harness) == "p1/a"


def test_every_target_disabled_fails_fast_with_503(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    harness.upstream.script("a", Fail(401, "key upstream-key-p1 is revoked"))
    harness.upstream.script("b", Fail(403, "forbidden"))
    with pytest.raises(openai.APIStatusError) as first:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert first.value.status_code == 502
    with pytest.raises(openai.APIStatusError) as second:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert second.value.status_code == 503
    # the provider's own words, scrubbed of its credential (SPEC §16)
    assert "p1/a → disabled: AUTH: key [redacted] is revoked" in second.value.message
    assert "upstream-key-p1" not in second.value.message
    assert "p2/b → disabled: FORBIDDEN" in second.value.message
    assert harness.upstream.count() == 2


def test_force_revive_keeps_the_model_up_when_everything_is_cooling(
    harness: Harness, clock: FakeClock
) -> None:
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n")
    )
    harness.upstream.script("a", Fail(500))
    harness.upstream.script("b", Fail(500))
    with pytest.raises(openai.APIStatusError):
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    clock.advance(1)  # both cooling; a expires first (it cooled first, same duration)
    assert served_by(harness) == "p1/a"


def test_a_full_outage_sends_one_call_per_cooling_window_into_a_dead_route(
    harness: Harness, clock: FakeClock
) -> None:
    # SPEC §16. Both targets answer 500; once both cool, one call force-revives the one
    # whose cooling ends first, and every other call in that window gets the fast 503.
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n")
    )
    harness.upstream.script("a", then=Fail(500))
    harness.upstream.script("b", then=Fail(500))
    with pytest.raises(openai.APIStatusError) as first:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert first.value.status_code == 502
    assert (harness.upstream.count("a"), harness.upstream.count("b")) == (1, 1)
    clock.advance(4)  # both cooling (10 s); a cooled first
    with pytest.raises(openai.APIStatusError) as revived:
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert revived.value.status_code == 502  # a was revived, failed; b was left alone
    assert (harness.upstream.count("a"), harness.upstream.count("b")) == (2, 1)
    for _ in range(3):  # the window is spent: nothing goes upstream until b's deadline
        clock.advance(1)
        with pytest.raises(openai.APIStatusError) as shed:
            harness.client().chat.completions.create(model="auto", messages=MESSAGES)
        assert shed.value.status_code == 503
        assert shed.value.response.headers["x-should-retry"] == "false"
        retry_after = int(shed.value.response.headers["retry-after"])
        assert 1 <= retry_after <= 10 - 4 - 1  # b's deadline, the earliest revival
        assert "p2/b → cooling for" in shed.value.message
    assert (harness.upstream.count("a"), harness.upstream.count("b")) == (2, 1)
    clock.advance(retry_after)  # a client honouring Retry-After meets b's ordinary probe
    harness.upstream.script("b", Reply("back"))
    assert served_by(harness) == "p2/b"
    assert (harness.upstream.count("a"), harness.upstream.count("b")) == (2, 2)


THREE = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: k1}
groups:
  - name: auto
    algorithm: ALGO
    targets:
      - {provider: p1, model: x, weight: 1}
      - {provider: p1, model: y, weight: 2}
      - {provider: p1, model: z, weight: 3}
"""


async def test_round_robin_spreads_calls_evenly(harness: Harness) -> None:
    # The distribution itself is the engine's (tests/engine/test_algorithms.py); here the
    # gateway's shared ticket must keep it exact under concurrent calls.
    harness.configure(THREE.replace("ALGO", "round-robin"))
    responses = []
    for _ in range(2):
        responses += await burst(harness, 30)
    counts = Counter(r.headers["x-switchyard-target"] for r in responses)
    assert counts == {"p1/x": 20, "p1/y": 20, "p1/z": 20}


async def test_weighted_follows_the_weights(harness: Harness) -> None:
    harness.configure(THREE.replace("ALGO", "weighted"))
    responses = []
    for _ in range(2):
        responses += await burst(harness, 30)
    counts = Counter(r.headers["x-switchyard-target"] for r in responses)
    # smooth weighted round-robin over a shared ticket: exact over whole cycles of 6
    assert counts == {"p1/x": 10, "p1/y": 20, "p1/z": 30}


async def test_least_busy_avoids_a_target_held_busy(harness: Harness) -> None:
    harness.configure(THREE.replace("ALGO", "least-busy"))
    harness.upstream.script("x", then=Silent())  # held busy until its client leaves
    busy = asyncio.create_task(burst(harness, 1))  # idle group: ties go by position, so x
    for _ in range(3000):  # wait for x to hold it, however slow the machine
        if harness.upstream.count("x") == 1:
            break
        await asyncio.sleep(0.01)
    assert harness.upstream.count("x") == 1
    followers = [
        await burst(harness, 1) for _ in range(10)
    ]  # one at a time: x is the only busy one
    assert [r[0].headers["x-switchyard-target"] for r in followers] == ["p1/y"] * 10
    assert harness.upstream.count("x") == 1
    busy.cancel()
    with pytest.raises(asyncio.CancelledError):
        await busy


def test_session_affinity_sticks_and_moves_when_the_target_cools(harness: Harness) -> None:
    harness.configure(
        THREE.replace("ALGO", "round-robin").replace(
            "    algorithm: round-robin\n",
            "    algorithm: round-robin\n    retry: {max_retries: 0}\n",
        )
    )
    client = harness.client(default_headers={"x-session-id": "agent-7"})

    def via(c: openai.OpenAI) -> str:
        return c.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES).headers[
            "x-switchyard-target"
        ]

    first = via(client)
    assert {via(client) for _ in range(9)} == {first}
    # other sessions still rotate
    assert len({served_by(harness) for _ in range(3)}) == 3
    model = first.split("/")[1]
    harness.upstream.script(model, Fail(503))
    moved = via(client)
    assert moved != first
    assert {via(client) for _ in range(5)} == {moved}
    # the body's `user` field is a session key too
    assert (
        len(
            {
                harness.client()
                .chat.completions.with_raw_response.create(
                    model="auto", messages=MESSAGES, user="u-1"
                )
                .headers["x-switchyard-target"]
                for _ in range(4)
            }
        )
        == 1
    )


class SlowCharges:
    """The store, with charges that take a while (a Redis round trip on a busy machine): a
    relay that charged after its error event would be closed mid-charge by a client that
    leaves on that event, and the target would never pay."""

    def __init__(self, store: object) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def record_failure(self, *args: object, **kwargs: object) -> object:
        await asyncio.sleep(0.2)
        return await self._store.record_failure(*args, **kwargs)  # type: ignore[attr-defined]


async def test_a_stream_cut_after_the_commit_point_still_counts_against_the_target(
    harness: Harness, clock: FakeClock
) -> None:
    from routing.simulator.script import DropAfter

    harness.configure(TWO_ROUTES)
    harness.runtime.use_store(SlowCharges(harness.runtime.store))  # type: ignore[attr-defined]
    harness.upstream.script("a", DropAfter(2))
    with pytest.raises(openai.APIError):  # the SDK stops reading at the error event
        list(harness.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True))
    # Charged before the error event went out, so a client that closes on it (the server
    # then closes the relay at that write) cannot spare the target: no wait needed here.
    health = (await harness.runtime.store.snapshot(["p1/a"], ["p1"])).targets.get("p1/a")
    assert health is not None and availability(health, clock.now) is Availability.COOLING
    assert served_by(harness) == "p2/b"


@pytest.mark.parametrize("door", ["messages", "responses"])
async def test_a_pass_through_cut_after_the_commit_point_is_charged_before_its_error_event(
    harness: Harness, clock: FakeClock, door: str
) -> None:
    """The same at the other doors: the target pays before the client can see the error."""
    from routing.simulator.script import DropAfter

    kind = "anthropic" if door == "messages" else "openai-responses"
    harness.configure(TWO_ROUTES.replace("kind: openai\n", f"kind: {kind}\n", 1))
    harness.runtime.use_store(SlowCharges(harness.runtime.store))  # type: ignore[attr-defined]
    harness.upstream.script("a", DropAfter(2))
    path, body, fails = (
        ("/v1/messages", {"messages": MESSAGES, "max_tokens": 64}, "event: error")
        if door == "messages"
        else ("/v1/responses", {"input": "hi"}, "event: response.failed")
    )
    seen: list[str] = []
    async with httpx.AsyncClient(base_url=harness.gateway.url, timeout=30) as http:
        async with http.stream(
            "POST",
            path,
            json={"model": "auto", "stream": True, **body},
            headers={"authorization": f"Bearer {harness.key}"},
        ) as answer:
            assert answer.status_code == 200
            async for line in answer.aiter_lines():
                seen.append(line)
                if line == fails:
                    break  # leave on the error event, as an SDK does
    assert seen[-1] == fails, seen
    health = (await harness.runtime.store.snapshot(["p1/a"], ["p1"])).targets.get("p1/a")
    assert health is not None and availability(health, clock.now) is Availability.COOLING


async def test_a_probe_whose_client_left_hands_the_slot_back(
    harness: Harness, clock: FakeClock
) -> None:
    from routing.simulator.script import Silent

    harness.configure(
        TWO_ROUTES.replace("      - {provider: p2, model: b}\n", "").replace(
            "  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n"
        )
    )
    harness.upstream.script("a", Fail(503), Silent(), then=Reply())
    with pytest.raises(openai.APIStatusError):
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)  # a cools
    clock.advance(11)
    with pytest.raises(openai.APITimeoutError):  # the probe: the client gives up and leaves
        harness.client(timeout=0.5).chat.completions.create(model="auto", messages=MESSAGES)
    assert harness.upstream.wait_disconnected(2.0)
    await asyncio.sleep(0.1)
    # no 503 while a dead probe's lease runs out: the next call probes, and a is healthy again
    assert served_by(harness) == "p1/a"
