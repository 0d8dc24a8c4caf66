"""The in-place retry loop: one target's attempts within a call (SPEC §3.6).

The call's loop (``routing.gateway.call``) picks a target, has its request built once
(:class:`~routing.gateway.state.Outbound`) and hands both here with the call's state
(``routing.gateway.state.CallState``). Each try is one attempt
(``routing.gateway.attempt``), recorded on the state. A failure goes to
``routing.engine.plan.decide``: RETRY here, after the decision's delay (a
``RetryEvent`` first, then the runtime's injectable sleep); anything else goes back to
the loop with the decision, once the target's
:class:`~routing.gateway.state.TargetOutcome` is on the state (the loop charges health
and moves on, or surfaces the failure). An answer is the call's committed attempt.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from routing.engine.failures import Failure, FailureCode
from routing.engine.plan import Action, Decision, decide, retries_allowed
from routing.gateway.attempt import Answer, run_attempt
from routing.gateway.events import RetryEvent
from routing.gateway.state import TargetOutcome
from routing.gateway.walk import has_alternative
from routing.upstream.openai import OpenAIClient, UpstreamFailure

if TYPE_CHECKING:
    from routing.gateway.state import CallState, Outbound
    from routing.gateway.table import TargetSpec


class RetryInPlace:
    """The tries of one target for one call; :meth:`run` carries them out."""

    __slots__ = ("call", "target", "probe", "outbound", "client")

    def __init__(
        self, call: CallState, target: TargetSpec, probe: bool, outbound: Outbound
    ) -> None:
        self.call = call
        self.target = target
        self.probe = probe
        self.outbound = outbound
        self.client: OpenAIClient = call.runtime.client_for(target.provider)

    async def run(self) -> Answer | tuple[Decision, Failure]:
        """Try until an answer, or until ``decide`` says to stop trying here."""
        call, target, probe, rewrites = self.call, self.target, self.probe, self.outbound.rewrites
        group, clock = call.group, call.runtime.monotonic
        tries = 0
        # On this target: each attempt as measured, each wait as asked (a faked sleep too).
        spent_s = 0.0
        while True:
            tries += 1
            attempt_started = clock()
            sent = await self._send(tries, attempt_started)
            if isinstance(sent, Answer):
                call.served = call.attempt(
                    target, tries, attempt_started, ok=True, probe=probe, rewrites=rewrites
                )
                call.served.usage = sent.usage  # a stream's final usage at its end
                call.rewrites = rewrites
                return sent
            failure, usage = sent
            spent_s += clock() - attempt_started
            record = call.attempt(
                target,
                tries,
                attempt_started,
                ok=False,
                probe=probe,
                failure=failure,
                rewrites=rewrites,
            )
            record.usage = usage
            alternative = not probe and await has_alternative(call, target)
            decision = decide(
                failure,
                retries_done=tries - 1,
                policy=group.retry,
                switch_codes=group.switch_codes,
                is_probe=probe,
                time_left_s=call.deadline - clock(),
                alternative=alternative,
                spent_s=spent_s,
                rand=call.runtime.rand,
            )
            if decision.action is not Action.RETRY:
                call.outcomes[target.key] = TargetOutcome(
                    failure, tries, spent_s * 1000, record.elapsed_ms
                )
                group.algorithm.on_failure(target.candidate, failure.code)
                return decision, failure
            record.will_retry = True
            spent_s += decision.delay_s
            budgeted = alternative and failure.code in group.switch_codes
            left = retries_allowed(
                group.retry, retries_done=tries, spent_s=spent_s, budgeted=budgeted
            )
            await self._wait(tries, failure, decision.delay_s, left)

    async def _send(
        self, tries: int, started: float
    ) -> Answer | tuple[Failure, dict[str, Any] | None]:
        """One attempt, counted in flight while it runs: its answer, or its failure and
        the usage the upstream reported before failing. A cancelled attempt (the client
        left) is recorded as ABORTED and frees a probe's lease before it propagates."""
        call, target, probe, outbound = self.call, self.target, self.probe, self.outbound
        store = call.runtime.store
        if call.track_inflight:
            await store.inflight_add(target.key, 1)
        committed = False
        headers = outbound.headers
        if call.trace is not None:
            headers = call.trace.attempt_started(target, tries, probe, headers)
        try:
            answer = await run_attempt(
                self.client,
                outbound.body,
                stream=call.stream,
                commit=call.group.commit,
                model=target.model,
                name=call.asked_for,
                deadline=call.deadline,
                door=call.door,
                kind=outbound.kind,
                endpoint=call.endpoint,
                headers=headers,
                names=call.prepared.tool_names,
                partial=call.rescuable,
                clock=call.runtime.monotonic,
            )
            committed = True
            return answer
        except UpstreamFailure as exc:
            return exc.failure, exc.usage
        except asyncio.CancelledError:
            call.attempt(
                target,
                tries,
                started,
                ok=False,
                probe=probe,
                code=FailureCode.ABORTED.value,
                rewrites=outbound.rewrites,
            )
            if probe:  # no verdict: let the next call probe instead of waiting out the lease
                await store.release_probe(target.key, call.runtime.clock())
            raise
        finally:
            call.upstream_s += call.runtime.monotonic() - started
            if call.track_inflight and not (committed and answer.reader is not None):
                await store.inflight_add(target.key, -1)

    async def _wait(self, tries: int, failure: Failure, delay_s: float, left: int) -> None:
        """Announce the retry (``left``: the retries still allowed after it), then wait its
        delay (upstream time: not overhead)."""
        call, runtime = self.call, self.call.runtime
        group = call.group
        runtime.hub.publish(
            RetryEvent(
                call_id=call.call_id,
                group=group.name,
                target=self.target.key,
                try_number=tries,
                code=failure.code.value,
                status=failure.status,
                delay_s=delay_s,
                message=failure.message,
                at=runtime.clock(),
                retries_left=left,
            )
        )
        slept_from = runtime.monotonic()
        await runtime.sleep(delay_s)
        call.upstream_s += runtime.monotonic() - slept_from
