"""A fault soak (issue 10): many calls through the official openai SDK against two loopback
routes that each fail ~30% of requests in every way the simulator knows — cuts before and
after the commit point (clean close, reset, broken last line), resets before headers, 5xx,
garbage bodies, empty answers. The one number that must stay 0: *silent truncations*, a
call the client saw end normally whose text is not a whole answer.

``SWITCHYARD_SOAK_CALLS`` sets the size (default 300, a few seconds; the closing note's
run used 3000). Bounded in count and time, loopback only, seeded.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import openai

from routing.simulator.script import (
    Behaviour,
    DropAfter,
    Empty,
    EndBeforeFinish,
    Fail,
    Malformed,
    NoDone,
    Reply,
    Reset,
)
from tests.conftest import TWO_ROUTES, Harness

CALLS = int(os.environ.get("SWITCHYARD_SOAK_CALLS", "300"))
FAULT_RATE = 0.3
FAULTS: list[Behaviour] = [
    DropAfter(2),
    EndBeforeFinish(2, how="clean"),
    EndBeforeFinish(2, how="reset"),
    EndBeforeFinish(2, how="malformed"),
    EndBeforeFinish(0, content=""),
    Fail(503, "overloaded"),
    Reset(),
    Malformed("json"),
    Empty(),
]
WHOLE = {"Hello from a.", "Hello from b."}


def script(rng: random.Random, n: int) -> list[Behaviour]:
    return [
        rng.choice(FAULTS) if rng.random() < FAULT_RATE else rng.choice([Reply(), NoDone()])
        for _ in range(n)
    ]


# The soak is about what a call does with faults (retries, switches, honest errors), not
# about cooling: with the default threshold of 1 both routes cool within a few calls and a
# full outage then sheds every call with the fast 503 (SPEC §16), which is right for dead
# routes but would leave nothing to soak.
SOAK_ROUTES = TWO_ROUTES.replace(
    "  - name: auto\n", "  - name: auto\n    circuit: {failure_threshold: 1000}\n"
)


def test_no_silent_truncation_under_thirty_percent_faults(harness: Harness) -> None:
    assert SOAK_ROUTES != TWO_ROUTES
    harness.configure(SOAK_ROUTES)
    rng = random.Random(10)
    # Every attempt (retries included) takes the next scripted behaviour; enough for all.
    harness.upstream.script("a", *script(rng, CALLS * 4), then=Reply())
    harness.upstream.script("b", *script(rng, CALLS * 4), then=Reply())
    client = harness.client(timeout=30)
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    for i in range(CALLS):
        if time.monotonic() - started > 600:
            break  # bounded in time as well as in count
        stream = rng.random() < 0.7
        try:
            if stream:
                text = "".join(
                    c.choices[0].delta.content or ""
                    for c in client.chat.completions.create(
                        model="auto", messages=[{"role": "user", "content": str(i)}], stream=True
                    )
                    if c.choices
                )
            else:
                reply = client.chat.completions.create(
                    model="auto", messages=[{"role": "user", "content": str(i)}]
                )
                text = reply.choices[0].message.content or ""
        except openai.APIError:
            outcomes["error surfaced"] += 1
            continue
        outcomes["whole answer" if text in WHOLE else "SILENT TRUNCATION"] += 1
    elapsed = time.monotonic() - started
    print(
        f"\nfault soak: {sum(outcomes.values())} calls in {elapsed:.0f} s, "
        f"upstream requests {harness.upstream.count()}: {dict(outcomes)}"
    )
    assert outcomes["SILENT TRUNCATION"] == 0
    assert outcomes["whole answer"] > CALLS * 0.8  # retries and switches carry most faults
    assert sum(outcomes.values()) == CALLS
