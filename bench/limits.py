"""The limit check's CPU per call, in process (SPEC §17: at most 20 µs).

``python -m bench.limits [--calls N]`` runs what a call does about limits — ``admit``
before any upstream and ``settle`` at its end, on the in-process counters — for a call
with no limits (a key and group without any: the ``is None`` path every call took before
limits existed) and for a call under a typical set (its key: ``rpm`` and ``cost_per_day``;
its group: ``rpm``, ``tpm``, ``concurrency``, ``cost_per_month``, session caps and the loop
guard), and prints CPU µs per call of each and their difference.

It measures the check alone, not a whole scenario-a call through HTTP (``bench.run``):
on this shared machine a whole call's CPU drifts by more than the check costs, so the
difference of two scenario runs could not show it. Limits are set high enough that no
call is refused: every call takes and settles all its rules, the costly path.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from routing.limits.counters import LocalCounters
from routing.limits.gate import Admission, LimitGate
from routing.limits.spec import GroupLimits, LimitSet, SessionCaps

BODY = {"model": "coding", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 32}
KEY = LimitSet(rpm=10**9, cost_per_day=10.0**9)
GROUP = GroupLimits(
    LimitSet(rpm=10**9, tpm=10**12, concurrency=10**6, cost_per_month=10.0**9),
    SessionCaps(tokens=10**12, calls=10**9),
    loop_guard=10**6,
)


async def per_call_us(calls: int, *, key: LimitSet | None, group: GroupLimits | None) -> float:
    now = [1_796_405_430.0]
    gate = LimitGate(LocalCounters(), lambda: now[0])
    key_limits, group_limits = key, group
    started = time.process_time()
    for n in range(calls):
        now[0] += 0.001
        if key_limits is None and group_limits is None:
            continue  # what Call.run does without limits: one test, no gate
        verdict = await gate.admit(
            key_id=7,
            key_name="agent",
            key_limits=key_limits,
            group="coding",
            group_limits=group_limits,
            session=f"s{n % 50}",
            body=BODY,
        )
        assert isinstance(verdict, Admission)
        gate.settle(verdict, 40, 0.0001)
    return (time.process_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    bare = asyncio.run(per_call_us(args.calls, key=None, group=None))
    key = asyncio.run(per_call_us(args.calls, key=KEY, group=None))
    every = asyncio.run(per_call_us(args.calls, key=KEY, group=GROUP))
    print(f"no limits:               {bare:7.2f} µs CPU per call")
    print(f"a key's rpm + budget:    {key:7.2f} µs CPU per call (2 rules)")
    print(f"key, group and session:  {every:7.2f} µs CPU per call (9 rules and the loop guard)")
    print("target: a check adds at most 20 µs of CPU per call")


if __name__ == "__main__":
    main()
