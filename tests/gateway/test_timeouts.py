"""Issue 41 item 2: timeouts that fit the failure, with the shipped defaults, on a virtual
clock the gateway and the simulator share (tests/virtual_clock.py): minutes pass when the
test says, over real sockets, and no test waits for them.

- a target that accepts the connection and never answers costs a stream ``headers_s``
  (10 s), not a minute, when a fallback exists;
- a reasoning model that sends its headers and then thinks for minutes without streaming
  its reasoning is not cut: the idle timeout does not apply before the first token, and
  ``first_token_s`` (300 s) bounds that wait;
- the defaults the docs give are the code's.
"""

from __future__ import annotations

import concurrent.futures
import re
from pathlib import Path
from typing import Any

import pytest

from routing.config.schema import TIMEOUT_DEFAULTS
from routing.gateway.events import CallRecord, FallbackEvent
from routing.simulator.script import Delay, EndBeforeFinish, Reply, Silent
from routing.upstream.base import Timeouts
from tests.conftest import TWO_ROUTES, Harness
from tests.virtual_clock import virtual_time

MESSAGES = [{"role": "user", "content": "hi"}]
DOCS = Path(__file__).resolve().parents[2] / "docs"
THOUGHT = "After some thought: 42."


def stream_in_background(h: Harness, pool: concurrent.futures.Executor, **body: Any) -> Any:
    def run() -> tuple[str, Any]:
        raw = h.client().chat.completions.with_raw_response.create(
            model="auto", messages=MESSAGES, stream=True, **body
        )
        chunks = list(raw.parse())
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, raw.headers["x-switchyard-target"]

    return pool.submit(run)


def only_call(h: Harness) -> CallRecord:
    [call] = h.events(CallRecord, at_least=1)
    return call


def test_a_target_that_never_answers_switches_within_the_headers_timeout(
    harness: Harness,
) -> None:
    harness.configure(TWO_ROUTES)  # the shipped timeouts and retry policy
    harness.upstream.script("a", then=Silent())
    headers_s = TIMEOUT_DEFAULTS["headers_s"]
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        virtual_time(harness.runtime, harness.upstream) as clock,
    ):
        done = stream_in_background(harness, pool)
        clock.wait_until(lambda: harness.upstream.count("a") == 1 and clock.has_timers(headers_s))
        clock.advance(headers_s - 0.5)
        assert not done.done() and harness.upstream.count("b") == 0  # still waiting on a
        clock.advance(0.5)
        text, target = done.result(timeout=10)
    assert (text, target) == ("Hello from b.", "p2/b")
    attempt = only_call(harness).attempts[0]
    assert (attempt.code, attempt.message) == ("TIMEOUT", "headers timeout: no response headers")
    assert attempt.elapsed_ms == pytest.approx(headers_s * 1000)  # not a minute
    assert harness.upstream.count("a") == 1  # TIMEOUT is not retried in place


def test_a_model_that_thinks_for_three_minutes_before_its_first_token_is_not_cut(
    harness: Harness,
) -> None:
    """The door does not stream its reasoning: headers and the role chunk at once, then
    nothing for 180 s, three times the idle timeout, and the answer."""
    harness.configure(TWO_ROUTES)
    harness.upstream.script("a", Reply(THOUGHT, think_s=180.0))
    first_token_s = TIMEOUT_DEFAULTS["first_token_s"]
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        virtual_time(harness.runtime, harness.upstream) as clock,
    ):
        done = stream_in_background(harness, pool)
        # the simulator thinks (180 s) and the gateway reads with the first-token deadline
        clock.wait_until(lambda: clock.has_timers(180.0, first_token_s))
        clock.advance(180.0)
        text, target = done.result(timeout=10)
    assert (text, target) == (THOUGHT, "p1/a")
    assert harness.upstream.count("b") == 0
    call = only_call(harness)
    assert [a.code for a in call.attempts] == [None]
    assert call.ttft_ms == pytest.approx(180_000, abs=100)  # the virtual three minutes, all waited


def test_a_thinker_past_first_token_s_is_cut_and_the_fallback_answers(harness: Harness) -> None:
    """The bound the previous test stays under is live: past ``first_token_s`` a silent
    stream is a TIMEOUT, and the call switches."""
    harness.configure(TWO_ROUTES)
    first_token_s = TIMEOUT_DEFAULTS["first_token_s"]
    harness.upstream.script("a", Reply(THOUGHT, think_s=first_token_s + 60))
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        virtual_time(harness.runtime, harness.upstream) as clock,
    ):
        done = stream_in_background(harness, pool)
        clock.wait_until(lambda: clock.has_timers(first_token_s))
        clock.advance(first_token_s)
        text, target = done.result(timeout=10)
    assert (text, target) == ("Hello from b.", "p2/b")
    attempt = only_call(harness).attempts[0]
    assert (attempt.code, attempt.message) == ("TIMEOUT", "first-token timeout")


def test_a_stream_that_stalls_then_closes_switches_once_it_used_the_budget(
    harness: Harness,
) -> None:
    """Issue 41 S09 with the shipped settings (``switch_after_ms`` 2 000): the stalled
    attempt's own time counts toward the budget, not only the waits between attempts. The
    upstream holds its answer 5 s (virtual) and then ends the body without a finish (a
    cut, a retry code): counting only the waits the target would be tried again; the
    first cut already used the budget, so the call switches at once, without a backoff."""
    harness.configure(
        TWO_ROUTES.replace("  - name: auto\n", "  - name: auto\n    commit: complete\n")
    )
    harness.runtime.rand = lambda: 0.5  # type: ignore[attr-defined]
    harness.upstream.script("a", then=Delay(5.0, EndBeforeFinish()))
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        virtual_time(harness.runtime, harness.upstream) as clock,
    ):
        done = stream_in_background(harness, pool)
        clock.wait_until(lambda: clock.has_timers(5.0, TIMEOUT_DEFAULTS["headers_s"]))
        clock.advance(5.0)
        text, target = done.result(timeout=10)
    assert (text, target) == ("Hello from b.", "p2/b")
    assert harness.upstream.count("a") == 1
    assert harness.sleeps.delays == []
    call = only_call(harness)
    assert [a.code for a in call.attempts] == ["TRANSPORT", None]
    assert call.attempts[0].elapsed_ms == pytest.approx(5000)
    [fallback] = harness.events(FallbackEvent)
    assert fallback.reason == "retry-exhausted"


def test_the_code_defaults_are_one_set() -> None:
    """The schema's declared defaults (the columns' and the API's) and the upstream
    client's own dataclass defaults are the same numbers."""
    assert TIMEOUT_DEFAULTS == {name: getattr(Timeouts(), name) for name in TIMEOUT_DEFAULTS}
    assert (
        TIMEOUT_DEFAULTS["headers_s"]
        < TIMEOUT_DEFAULTS["idle_s"]
        < TIMEOUT_DEFAULTS["first_token_s"]
        < TIMEOUT_DEFAULTS["total_s"]
    )


def test_the_documented_defaults_are_the_codes() -> None:
    """docs/routing.md's timeout table and docs/outages.md's defaults line say what the
    code does."""
    table = (DOCS / "routing.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+_s)` \|.*\| (\d+(?:\.\d+)?) \|$", table, re.M))
    assert {name: float(value) for name, value in rows.items()} == TIMEOUT_DEFAULTS
    outages = (DOCS / "outages.md").read_text()
    [line] = re.findall(r"^Defaults: (.*)$", outages, re.M)
    said = dict(re.findall(r"`(\w+_s)` (\d+(?:\.\d+)?) s", line))
    assert {name: float(value) for name, value in said.items()} == TIMEOUT_DEFAULTS
