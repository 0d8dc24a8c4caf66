"""A call: one client request carried across attempts, retries and switches.

The loop, in SPEC §3 terms::

    pick a target (algorithm order → affinity → health: skip disabled/cooling/failed,
                   take the probe lease of a probe-eligible one, else force-revive the
                   earliest-cooling one, once per cooling window)
      └─ attempt → Answer (commit point reached) → relay, record success
               └─ Failure → decide(): RETRY in place after a delay
                                      SWITCH: charge health once, record a fallback, pick again
                                      SURFACE: the client gets this error as-is
    nothing left → 502 ROUTES_EXHAUSTED (503 + Retry-After when nothing was even tried)

Health is charged once per target per call, when the call gives up on that target.

This module is the loop (``Call``: admit, walk, switch, commit, surface, exhaust), kept
apart from the call's state as tenacity keeps ``RetryCallState`` apart from its retry
loop: the record and its public operations (attempt, charge, outbound, finish…) are
``routing.gateway.state.CallState``, which every part takes. Beside it: the target walker
(``routing.gateway.walk``), one target's tries and the in-place retry
(``routing.gateway.retry``, each try an attempt, ``routing.gateway.attempt``), a stream
past its commit point (``routing.gateway.relay``; a cut one continued elsewhere by
``routing.gateway.rescue``). Deadlines and durations are read from the runtime's
injectable ``monotonic`` clock, health times from its ``clock``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass

from routing.engine.failures import Failure, FailureCode
from routing.engine.health import EventKind
from routing.engine.plan import Action, ContextLimit, Decision, SwitchReason, decide
from routing.engine.select import switch_reason
from routing.gateway.attempt import Answer
from routing.gateway.events import CallOutcome, FallbackEvent
from routing.gateway.exhaustion import Exhaustion
from routing.gateway.refusal import refusal_reply
from routing.gateway.relay import stream_reply
from routing.gateway.replies import ErrorReply, JsonReply, Reply
from routing.gateway.retry import RetryInPlace
from routing.gateway.state import CallState, TargetOutcome
from routing.gateway.table import TargetSpec
from routing.gateway.walk import pick
from routing.limits.rules import Refusal

AFFINITY_TTL_S = 3600.0
log = logging.getLogger("switchyard.gateway")


@dataclass(frozen=True, slots=True)
class SwitchedFrom:
    """The target a call just gave up on: a fallback event once the next pick is known
    (none when nothing is left: the last target's failure is the call's own)."""

    target: TargetSpec
    failure: Failure
    reason: SwitchReason
    cooldown_s: float | None  # the cooling it entered, if giving up on it cooled it


class Call:
    """The loop that runs one call's :class:`CallState` to its reply."""

    __slots__ = ("state",)

    def __init__(self, state: CallState) -> None:
        self.state = state

    async def run(self) -> Reply:
        state = self.state
        try:
            if state.group.limits is not None or (state.key is not None and state.key.limits):
                refused = await self._admit()
                if refused is not None:
                    return refused
            return await self._run()
        except asyncio.CancelledError:
            state.finish(CallOutcome.ABORTED, error_code=FailureCode.ABORTED.value, http_status=499)
            raise
        except Exception:
            # A bug, not an upstream's failure: still on the record, never left open.
            state.finish(CallOutcome.FAILED, error_code=FailureCode.UNKNOWN.value, http_status=500)
            raise

    async def _admit(self) -> Reply | None:
        """Limits are checked before any upstream (``routing.limits``): a refusal is on
        the record (outcome refused) and never touches a target's health."""
        state = self.state
        key = state.key
        state.gate = gate = state.runtime.limit_gate
        verdict = await gate.admit(
            key_id=key.id if key is not None else None,
            key_name=key.name if key is not None else "",
            key_limits=key.limits if key is not None else None,
            group=state.group.name,
            group_limits=state.group.limits,
            session=state.session,
            body=state.body,
        )
        if not isinstance(verdict, Refusal):
            state.admission = verdict
            return None
        log.info(
            "refused call=%s group=%s key=%s code=%s: %s",
            state.call_id,
            state.group.name,
            key.name if key is not None else "-",
            verdict.code.value,
            verdict.message(),
        )
        state.record.reason = verdict.message()[:500]  # as the door's refusals (SPEC §12)
        state.finish(CallOutcome.REFUSED, error_code=verdict.code.value, http_status=429)
        return refusal_reply(
            verdict,
            now=state.runtime.clock(),
            door=state.door,
            headers={"x-switchyard-request-id": state.call_id},
        )

    async def _run(self) -> Reply:
        state = self.state
        group = state.group
        ticket = (
            await state.runtime.store.next_ticket(group.name) if group.algorithm.uses_ticket else 0
        )
        switched_from: SwitchedFrom | None = None
        while True:
            picked = await pick(state, ticket)
            if switched_from is not None:
                # A switch only when there is somewhere to go: the last target's failure
                # is in the call's record, not a fallback (SPEC §16).
                self._publish_fallback(switched_from, to=picked[0] if picked else None)
                switched_from = None
            if picked is None:
                return await self._exhausted()
            target, probe = picked
            result = await self._use_target(target, probe)
            if isinstance(result, Answer):
                return await self._commit(target, result, probe)
            decision, failure = result
            events = await state.charge(target, failure, probe)
            if decision.action is Action.SURFACE:
                return self._surface(failure)
            state.failed.add(target.key)
            if failure.code is FailureCode.CONTEXT_WINDOW_EXCEEDED:
                state.context_limit = ContextLimit(target.context_window)
            cooldown = next((e.cooldown_s for e in events if e.kind is EventKind.COOLING), None)
            state.cooled(target, cooldown)
            cooled = any(e.kind is EventKind.COOLING for e in events)
            reason = switch_reason(decision.reason, cooled=cooled)
            switched_from = SwitchedFrom(target, failure, reason, cooldown)

    # ------------------------------------------------------------------ attempts
    async def _use_target(
        self, target: TargetSpec, probe: bool
    ) -> Answer | tuple[Decision, Failure]:
        """Try ``target`` in place (``routing.gateway.retry``): its answer, or the decision
        to leave it and the failure that made it."""
        state = self.state
        if target.provider.config_error:
            return self._unsendable(target, probe)
        outbound = await state.outbound(target)
        state.group.algorithm.on_dispatch(target.candidate)
        tried = await RetryInPlace(state, target, probe, outbound).run()
        if isinstance(tried, tuple) and state.learned_no_mid_system(target, outbound, tried[1]):
            # The request was at fault, not the target: no health charge; again, folded.
            outbound = await state.outbound(target)
            tried = await RetryInPlace(state, target, probe, outbound).run()
        return tried

    def _unsendable(self, target: TargetSpec, probe: bool) -> tuple[Decision, Failure]:
        """A stored credential or header no request can carry (SPEC §9): a configuration
        failure of this target, recorded like any attempt, and the call moves on."""
        state = self.state
        runtime = state.runtime
        failure = Failure(FailureCode.MISSING_CREDENTIAL, target.provider.config_error)
        state.attempt(target, 1, runtime.monotonic(), ok=False, probe=probe, failure=failure)
        decision = decide(
            failure,
            retries_done=0,
            policy=state.group.retry,
            switch_codes=state.group.switch_codes,
            is_probe=probe,
            time_left_s=state.deadline - runtime.monotonic(),
            rand=runtime.rand,
        )
        state.outcomes[target.key] = TargetOutcome(failure, 1, 0.0, 0.0)
        state.group.algorithm.on_failure(target.candidate, failure.code)
        return decision, failure

    def _publish_fallback(self, switched: SwitchedFrom, *, to: TargetSpec | None) -> None:
        state = self.state
        source, failure, reason = switched.target, switched.failure, switched.reason
        last = state.record.attempts[-1] if state.record.attempts else None
        if last is not None:
            last.reason = reason
        if to is None:
            return  # nowhere to go: not a switch
        if last is not None:
            last.switched, last.switched_to = True, to.key
        outcome = state.outcomes.get(source.key)
        state.runtime.hub.publish(
            FallbackEvent(
                call_id=state.call_id,
                group=state.group.name,
                from_target=source.key,
                to_target=to.key,
                reason=reason,
                code=failure.code.value,
                status=failure.status,
                message=failure.message,
                cooldown_s=switched.cooldown_s,
                at=state.runtime.clock(),
                attempts=outcome.attempts if outcome is not None else 1,
            )
        )

    # ------------------------------------------------------------------ endings
    async def _commit(self, target: TargetSpec, answer: Answer, probe: bool) -> Reply:
        state = self.state
        runtime, record = state.runtime, state.record
        store = runtime.store
        ttft_ms = answer.ttft_s * 1000 if answer.ttft_s is not None else None
        if state.trace is not None:
            state.trace.committed(answer.ttft_s)
        state.group.algorithm.on_success(target.candidate, ttft_ms)
        # A target that had no health state needs no success recorded, unless its latency
        # feeds the algorithm: with a shared store that saves a round trip per call.
        if target.key not in state.clean or state.track_latency:
            events = await store.record_success(target.key, runtime.clock(), ttft_ms)
            if events:
                runtime.hub.publish_all(events)
        if state.session:
            await store.affinity_set(state.session, target.key, AFFINITY_TTL_S)
        if answer.reader is None:  # the whole answer is here: remember who wrote it
            await state.continuity.remember(target, answer.turn)
        record.served_by = target.key
        committed_at = runtime.monotonic()
        record.ttft_ms = (committed_at - state.started) * 1000
        overhead_ms = max(0.0, (committed_at - state.started - state.upstream_s) * 1000)
        record.overhead_ms = overhead_ms
        headers = {
            "x-switchyard-target": target.key,
            "x-switchyard-attempts": str(len(record.attempts)),
            "x-switchyard-request-id": state.call_id,
            "x-switchyard-trail": record.trail(),
            "x-switchyard-overhead-ms": f"{overhead_ms:.2f}",
        }
        if state.rewrites:
            headers["x-switchyard-rewrites"] = ",".join(state.rewrites)
        if not state.stream:
            record.usage = answer.usage
            state.finish(CallOutcome.OK)
            return JsonReply(answer.prefix[0], headers=headers)
        return stream_reply(state, target, answer, headers)

    def _surface(self, failure: Failure) -> ErrorReply:
        state = self.state
        status = failure.status if failure.status and 400 <= failure.status < 600 else 502
        log.warning(
            "surfaced call=%s group=%s code=%s status=%s: not a switch code here: %s",
            state.call_id,
            state.group.name,
            failure.code.value,
            status,
            failure.message,
        )
        state.finish(CallOutcome.FAILED, error_code=failure.code.value, http_status=status)
        said = failure.client_message
        if failure.public is not None and state.record.attempts:  # which provider, and how
            said = f"{state.record.attempts[-1].target} → {failure.code.value}: {said}"
        return ErrorReply(
            status=status,
            message=said,
            code=failure.code.value,
            type="invalid_request_error" if status < 500 else "upstream_error",
            headers=state.trail_headers(),
            door=state.door,
        )

    async def _exhausted(self) -> ErrorReply:
        state = self.state
        group = state.group
        snapshot = await state.runtime.store.snapshot(group.keys, group.provider_names)
        now = state.runtime.clock()
        ended = Exhaustion(
            group.targets,
            snapshot.verdicts(group.members, now),
            state.outcomes,
            state.skipped,
            state.context_limit,
        )
        tried = bool(state.record.attempts)
        # The official SDKs honour this: the gateway already retried and switched, so a
        # client retry would replay the whole chain (SPEC §3.10).
        headers = {**state.trail_headers(), "x-should-retry": "false"}
        status = 502 if tried else 503
        waits = ended.revivals(now, all_waiting=tried)
        if waits:
            headers["retry-after"] = str(max(1, math.ceil(min(waits) - now)))
        message = ended.message(group.name)
        log.error(
            "exhausted call=%s group=%s status=%s: %s",
            state.call_id,
            group.name,
            status,
            ended.message(group.name, detail=True),
        )
        state.finish(CallOutcome.FAILED, error_code="ROUTES_EXHAUSTED", http_status=status)
        return ErrorReply(
            status=status,
            message=message,
            code="ROUTES_EXHAUSTED",
            type="upstream_error",
            headers=headers,
            door=state.door,
            logged=True,  # one ERROR line per exhausted call: Django's is not added
        )
