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

This module is the walk over targets (``Call``: pick, charge, switch, commit, exhaust,
finish the record). Its parts live beside it: one target's tries and the in-place
retry in ``routing.gateway.retry`` (each try an attempt, ``routing.gateway.attempt``);
a stream past its commit point in ``routing.gateway.relay`` (a cut one continued
elsewhere by ``routing.gateway.rescue``). Deadlines and durations are read from the
runtime's injectable ``monotonic`` clock, health times from its ``clock``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from routing.engine.algorithms import SelectionView
from routing.engine.failures import Failure, FailureCode
from routing.engine.health import EventKind, HealthEvent
from routing.engine.plan import Action, ContextLimit, Decision, SwitchReason, decide
from routing.engine.rescue import Resume
from routing.engine.select import Charge, Use, charge, choose, has_alternative, switch_reason
from routing.gateway.attempt import Answer
from routing.gateway.continuity import UNREWRITABLE, Continuity, Scope
from routing.gateway.events import AttemptRecord, CallOutcome, CallRecord, FallbackEvent
from routing.gateway.exhaustion import Exhaustion
from routing.gateway.refusal import refusal_reply
from routing.gateway.relay import stream_reply
from routing.gateway.replies import ErrorReply, JsonReply, Reply
from routing.gateway.retry import Outbound, RetryInPlace, TargetOutcome
from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec, KeySpec, TargetSpec
from routing.limits.gate import Admission, LimitGate
from routing.limits.rules import Refusal
from routing.limits.spec import cost_of, usage_tokens
from routing.protocols import Protocol
from routing.protocols.betas import filter_betas
from routing.protocols.legs import Prepared, translate_body
from routing.protocols.registry import PROTOCOLS

if TYPE_CHECKING:
    from routing.observability.spans import CallTrace

AFFINITY_TTL_S = 3600.0
log = logging.getLogger("switchyard.gateway")
PROBE_LEASE_CAP_S = 120.0


@dataclass(frozen=True, slots=True)
class SwitchedFrom:
    """The target a call just gave up on: a fallback event once the next pick is known
    (none when nothing is left: the last target's failure is the call's own)."""

    target: TargetSpec
    failure: Failure
    reason: SwitchReason
    cooldown_s: float | None  # the cooling it entered, if giving up on it cooled it


class Call:
    def __init__(
        self,
        runtime: Runtime,
        group: GroupSpec,
        body: dict[str, Any],
        *,
        stream: bool,
        session: str | None = None,
        call_id: str | None = None,
        started: float | None = None,
        door: Protocol = Protocol.CHAT,
        prepared: Prepared | None = None,
        endpoint: str | None = None,
        skipped: Mapping[str, str] | None = None,
        protocol_headers: Mapping[str, str] | None = None,
        key: KeySpec | None = None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> None:
        """``started`` is the loop time the request reached the gateway (the ASGI entry), so
        ``x-switchyard-overhead-ms`` covers body reading, routing and the view, not just us.
        The call keeps the request's age, not the stamp: it measures on the runtime's
        ``monotonic`` (deadline, attempts, overhead), which a test may replace.

        ``door`` is the protocol the client speaks; ``prepared`` its request translated for
        every kind of the group (``routing.protocols.legs``; None: chat door, chat targets).
        ``endpoint`` ``"embeddings"`` sends the body as-is to ``<base>/embeddings``;
        ``skipped`` targets (key → why) are never tried and say why in an exhaustion;
        ``protocol_headers`` (the door's ``anthropic-beta``…) go to same-protocol targets.
        ``trace_headers`` (the request's, for its ``traceparent``) matter only with
        tracing on (``routing.observability.tracing``)."""
        self.runtime = runtime
        self.group = group
        self.body = body
        self.door = door
        self.prepared = prepared or Prepared(door, body)
        self.endpoint = endpoint
        self.skipped: Mapping[str, str] = skipped or {}
        self.protocol_headers = protocol_headers or None
        self.stream = stream
        self.session = session
        self.call_id = call_id or uuid.uuid4().hex
        now = runtime.monotonic()
        age = 0.0 if started is None else asyncio.get_running_loop().time() - started
        self.started = now - age
        self.deadline = self.started + group.deadline_s
        self.upstream_s = 0.0  # time spent waiting on upstreams and backoff: not overhead
        self.record = CallRecord(
            call_id=self.call_id,
            group=group.name,
            session=session,
            stream=stream,
            started_at=runtime.clock(),
            front_door=door.value,
            endpoint=endpoint,
            key_id=key.id if key is not None else None,
            key_name=key.name if key is not None else "",
        )
        self.outcomes: dict[str, TargetOutcome] = {}
        self.failed: set[str] = set(self.skipped)
        self.context_limit: ContextLimit | None = None  # set when a context window overflowed
        self.track_inflight = group.algorithm.uses_inflight
        self.track_latency = group.algorithm.uses_latency
        self.clean: set[str] = set()  # targets picked with no health state at all
        self.continuity, self.door_continuity = self._continuities(key)
        self.rewrites: list[str] = []  # of the attempt that answered (x-switchyard-rewrites)
        self.trace: CallTrace | None = (
            None if runtime.tracing is None else self._start_trace(trace_headers)
        )
        # A chat stream of a group that resumes keeps its text and request past the commit
        # point, to continue elsewhere if it breaks (SPEC §16; routing.gateway.rescue).
        self.rescuable = group.resume is Resume.CONTINUATION and stream and not endpoint
        self.key = key
        self.admission: Admission | None = None  # limits taken for this call (SPEC §17)
        self.gate: LimitGate | None = None  # where they were taken (settled there at the end)
        self.served: AttemptRecord | None = None  # the committed attempt (its usage at the end)
        runtime.calls_open += 1  # until _finish (switchyard_calls_in_progress on /metrics)

    def _continuities(self, key: KeySpec | None) -> tuple[Continuity, Continuity | None]:
        """Continuity reads the canonical (chat) view, whatever the door; a Messages or
        Responses pass-through also rewrites the door's own shape, losslessly. A call
        without a session keeps its provenance per group and key."""
        store = self.runtime.store
        scope = Scope(self.session, self.group.name, key.id if key is not None else None)
        door = PROTOCOLS[self.door]
        view = None if door.canonical else door.history
        return (
            Continuity(store, self.prepared.canonical, scope),
            Continuity(store, self.body, scope, view=view) if view is not None else None,
        )

    def _start_trace(self, headers: Mapping[str, str] | None) -> CallTrace:
        assert self.runtime.tracing is not None
        model = self.body.get("model")
        trace = self.runtime.tracing.start_call(
            headers=headers,
            started_ns=time.time_ns() - int((self.runtime.monotonic() - self.started) * 1e9),
            door=self.record.door,
            endpoint=self.endpoint,
            requested_model=model if isinstance(model, str) else self.group.name,
            group=self.group.name,
            key_name=self.record.key_name,
            request_id=self.call_id,
            stream=self.stream,
            commit=self.group.commit.value,
        )
        self.record.trace_id = trace.trace_id
        return trace

    # ------------------------------------------------------------------ main loop
    async def run(self) -> Reply:
        try:
            if self.group.limits is not None or (self.key is not None and self.key.limits):
                refused = await self._admit()
                if refused is not None:
                    return refused
            return await self._run()
        except asyncio.CancelledError:
            self._finish(CallOutcome.ABORTED, error_code=FailureCode.ABORTED.value, http_status=499)
            raise
        except Exception:
            # A bug, not an upstream's failure: still on the record, never left open.
            self._finish(CallOutcome.FAILED, error_code=FailureCode.UNKNOWN.value, http_status=500)
            raise

    async def _admit(self) -> Reply | None:
        """Limits are checked before any upstream (``routing.limits``): a refusal is on
        the record (outcome refused) and never touches a target's health."""
        key = self.key
        self.gate = gate = self.runtime.limit_gate
        verdict = await gate.admit(
            key_id=key.id if key is not None else None,
            key_name=key.name if key is not None else "",
            key_limits=key.limits if key is not None else None,
            group=self.group.name,
            group_limits=self.group.limits,
            session=self.session,
            body=self.body,
        )
        if not isinstance(verdict, Refusal):
            self.admission = verdict
            return None
        log.info(
            "refused call=%s group=%s key=%s code=%s: %s",
            self.call_id,
            self.group.name,
            key.name if key is not None else "-",
            verdict.code.value,
            verdict.message(),
        )
        self.record.reason = verdict.message()[:500]  # as the door's refusals (SPEC §12)
        self._finish(CallOutcome.REFUSED, error_code=verdict.code.value, http_status=429)
        return refusal_reply(
            verdict,
            now=self.runtime.clock(),
            door=self.door,
            headers={"x-switchyard-request-id": self.call_id},
        )

    async def _run(self) -> Reply:
        store = self.runtime.store
        ticket = await store.next_ticket(self.group.name) if self.group.algorithm.uses_ticket else 0
        switched_from: SwitchedFrom | None = None
        while True:
            pick = await self._pick(ticket)
            if switched_from is not None:
                # A switch only when there is somewhere to go: the last target's failure
                # is in the call's record, not a fallback (SPEC §16).
                self._publish_fallback(switched_from, to=pick[0] if pick else None)
                switched_from = None
            if pick is None:
                return await self._exhausted()
            target, probe = pick
            result = await self._use_target(target, probe)
            if isinstance(result, Answer):
                return await self._commit(target, result, probe)
            decision, failure = result
            events = await self._charge(target, failure, probe)
            if decision.action is Action.SURFACE:
                return self._surface(failure)
            self.failed.add(target.key)
            if failure.code is FailureCode.CONTEXT_WINDOW_EXCEEDED:
                self.context_limit = ContextLimit(target.context_window)
            cooldown = next((e.cooldown_s for e in events if e.kind is EventKind.COOLING), None)
            cooled = any(e.kind is EventKind.COOLING for e in events)
            reason = switch_reason(decision.reason, cooled=cooled)
            switched_from = SwitchedFrom(target, failure, reason, cooldown)

    # ------------------------------------------------------------------ selection
    async def _pick(self, ticket: int) -> tuple[TargetSpec, bool] | None:
        """Walk the engine's choices (``routing.engine.select.choose``) and carry them out:
        SERVE at once, PROBE if the lease is free, REVIVE if the store still agrees."""
        group, store = self.group, self.runtime.store
        if self.runtime.monotonic() >= self.deadline:
            return None  # the call's deadline: stop here rather than charge targets for it
        snapshot = await store.snapshot(group.keys, group.provider_names)
        now = self.runtime.clock()
        order = group.algorithm.order(
            SelectionView(ticket=ticket, inflight=snapshot.inflight, latency_ms=snapshot.latency_ms)
        )
        sticky = await store.affinity_get(self.session) if self.session else None
        for choice in choose(
            [c.key for c in order],
            snapshot.verdicts(group.members, now),
            now,
            sticky=sticky,
            excluded=self._excluded(),
        ):
            target = group.by_key[choice.key]
            if choice.use is Use.SERVE:
                if target.key not in snapshot.targets:
                    self.clean.add(target.key)
                return target, False
            if choice.use is Use.PROBE:
                lease = min(target.provider.timeouts.total_s, PROBE_LEASE_CAP_S)
                if await store.try_begin_probe(target.key, now, lease):
                    return target, True
                continue
            # Nothing eligible: force-revive the cooling target that expires first, so the
            # model stays up instead of failing while a route may well have recovered. It is
            # the only REVIVE offered, once per cooling window: if the store refuses (another
            # call or process won it), this call gets the fast 503.
            events = await store.force_revive(target.key, now)
            if events:
                self.runtime.hub.publish_all(events)
                return target, True
        return None

    def _excluded(self) -> set[str]:
        """Targets this call may not use: failed or skipped, or too small for its context."""
        limit = self.context_limit
        if limit is None:
            return self.failed
        return self.failed | {
            t.key for t in self.group.targets if not limit.allows(t.context_window)
        }

    # ------------------------------------------------------------------ attempts
    async def _use_target(
        self, target: TargetSpec, probe: bool
    ) -> Answer | tuple[Decision, Failure]:
        """Try ``target`` in place (``routing.gateway.retry``): its answer, or the decision
        to leave it and the failure that made it."""
        if target.provider.config_error:
            return self._unsendable(target, probe)
        outbound = await self._outbound(target)
        self.group.algorithm.on_dispatch(target.candidate)
        return await RetryInPlace(self, target, probe, outbound).run()

    async def _outbound(self, target: TargetSpec) -> Outbound:
        """The request for ``target``, built once for all its tries: continuity-rewritten
        and in its protocol, with the door's protocol headers a same-kind target may carry
        (its betas filtered), and every rewrite made on the way."""
        kind = target.provider.protocol.kind
        rewrites: list[str] = []
        if self.endpoint:  # embeddings: no history to rewrite
            body = orjson.dumps({**self.body, "model": target.model})
        elif kind is self.door and self.door_continuity is not None:
            outbound, rewrites = await self.door_continuity.outbound(target)
            body = orjson.dumps(outbound)
        else:
            outbound, rewrites = await self.continuity.outbound(target)
            body, rewrites = self._outbound_bytes(kind, target, outbound, rewrites)
        protocol_headers = self.protocol_headers if kind is self.door else None
        if protocol_headers:
            provider = target.provider
            protocol_headers, stripped = filter_betas(
                protocol_headers, provider.betas_allow, provider.betas_strip
            )
            rewrites = [*rewrites, *stripped]
        # orjson's output keeps its growth buffer (about twice the body); the request, and
        # with it the body, lives as long as the stream: keep an exact-size copy.
        return Outbound(kind, bytes(memoryview(body)), protocol_headers, rewrites)

    async def _has_alternative(self, target: TargetSpec) -> bool:
        """Whether another target of the chain could take this call now (only asked after
        a failure, so a call that does not fail pays nothing for it)."""
        group = self.group
        if len(group.targets) < 2:
            return False
        snapshot = await self.runtime.store.snapshot(group.keys, group.provider_names)
        now = self.runtime.clock()
        verdicts = snapshot.verdicts(group.members, now)
        return has_alternative(group.keys, verdicts, now, self._excluded() | {target.key})

    def _outbound_bytes(
        self, kind: Protocol, target: TargetSpec, outbound: dict[str, Any], rewrites: list[str]
    ) -> tuple[bytes, list[str]]:
        """The attempt's body in the target's protocol, and every rewrite made to it.

        ``outbound`` is the continuity-rewritten canonical body. Chat to chat sends it as
        is; a cross-protocol target gets it translated (the door's request was already
        checked translatable at the door); a same-protocol target other than chat gets the
        door's body with only ``model`` rewritten (a Messages or Responses pass-through is
        rewritten in its own shape before this, so this is only a safety net)."""
        if kind is self.door and target.provider.protocol.canonical:  # chat to chat
            return orjson.dumps(outbound), rewrites
        notes = list(self.prepared.notes.get(kind, ()))
        if kind is self.door:
            skipped = [UNREWRITABLE] if rewrites else []
            return self.prepared.request(kind, target.model), skipped
        if not rewrites:
            return self.prepared.request(kind, target.model), notes
        body, translation = translate_body(kind, outbound, target.model)
        return body, rewrites + list(self.prepared.door_notes) + translation

    def _unsendable(self, target: TargetSpec, probe: bool) -> tuple[Decision, Failure]:
        """A stored credential or header no request can carry (SPEC §9): a configuration
        failure of this target, recorded like any attempt, and the call moves on."""
        failure = Failure(FailureCode.MISSING_CREDENTIAL, target.provider.config_error)
        self._attempt(target, 1, self.runtime.monotonic(), ok=False, probe=probe, failure=failure)
        decision = decide(
            failure,
            retries_done=0,
            policy=self.group.retry,
            switch_codes=self.group.switch_codes,
            is_probe=probe,
            time_left_s=self.deadline - self.runtime.monotonic(),
            rand=self.runtime.rand,
        )
        self.outcomes[target.key] = TargetOutcome(failure, 1, 0.0, 0.0)
        self.group.algorithm.on_failure(target.candidate, failure.code)
        return decision, failure

    def _attempt(
        self,
        target: TargetSpec,
        tries: int,
        started: float,
        *,
        ok: bool,
        probe: bool,
        failure: Failure | None = None,
        code: str | None = None,
        rewrites: list[str] | None = None,
    ) -> AttemptRecord:
        record = AttemptRecord(
            target=target.key,
            try_number=tries,
            ok=ok,
            elapsed_ms=(self.runtime.monotonic() - started) * 1000,
            code=failure.code.value if failure else code,
            status=failure.status if failure else None,
            message=failure.message if failure else "",
            probe=probe,
            rewrites=tuple(rewrites or ()),
            kind=target.provider.kind,
        )
        self.record.attempts.append(record)
        if self.trace is not None:
            self.trace.attempt_ended(target, record)
        return record

    async def _charge(self, target: TargetSpec, failure: Failure, probe: bool) -> list[HealthEvent]:
        """Carry out the engine's charge for giving up on ``target`` (SPEC §3.9)."""
        store, now = self.runtime.store, self.runtime.clock()
        match charge(failure.code, switch_codes=self.group.switch_codes, probe=probe):
            case Charge.DISABLE_PROVIDER:
                events = await store.disable_provider(target.provider.name, failure, now)
            case Charge.FAILURE:
                circuit = target.circuit or self.group.circuit
                events = await store.record_failure(
                    target.key, failure, circuit, now, was_probe=probe
                )
            case Charge.END_PROBE:
                events = await store.record_success(target.key, now, None)
            case Charge.NOTHING:
                events = []
        self.runtime.hub.publish_all(events)
        return events

    def _publish_fallback(self, switched: SwitchedFrom, *, to: TargetSpec | None) -> None:
        source, failure, reason = switched.target, switched.failure, switched.reason
        last = self.record.attempts[-1] if self.record.attempts else None
        if last is not None:
            last.reason = reason
        if to is None:
            return  # nowhere to go: not a switch
        if last is not None:
            last.switched, last.switched_to = True, to.key
        outcome = self.outcomes.get(source.key)
        self.runtime.hub.publish(
            FallbackEvent(
                call_id=self.call_id,
                group=self.group.name,
                from_target=source.key,
                to_target=to.key,
                reason=reason,
                code=failure.code.value,
                status=failure.status,
                message=failure.message,
                cooldown_s=switched.cooldown_s,
                at=self.runtime.clock(),
                attempts=outcome.attempts if outcome is not None else 1,
            )
        )

    # ------------------------------------------------------------------ endings
    async def _commit(self, target: TargetSpec, answer: Answer, probe: bool) -> Reply:
        store = self.runtime.store
        ttft_ms = answer.ttft_s * 1000 if answer.ttft_s is not None else None
        if self.trace is not None:
            self.trace.committed(answer.ttft_s)
        self.group.algorithm.on_success(target.candidate, ttft_ms)
        # A target that had no health state needs no success recorded, unless its latency
        # feeds the algorithm: with a shared store that saves a round trip per call.
        if target.key not in self.clean or self.track_latency:
            events = await store.record_success(target.key, self.runtime.clock(), ttft_ms)
            if events:
                self.runtime.hub.publish_all(events)
        if self.session:
            await store.affinity_set(self.session, target.key, AFFINITY_TTL_S)
        if answer.reader is None:  # the whole answer is here: remember who wrote it
            await self.continuity.remember(target, answer.turn)
        self.record.served_by = target.key
        committed_at = self.runtime.monotonic()
        self.record.ttft_ms = (committed_at - self.started) * 1000
        overhead_ms = max(0.0, (committed_at - self.started - self.upstream_s) * 1000)
        self.record.overhead_ms = overhead_ms
        headers = {
            "x-switchyard-target": target.key,
            "x-switchyard-attempts": str(len(self.record.attempts)),
            "x-switchyard-request-id": self.call_id,
            "x-switchyard-trail": self.record.trail(),
            "x-switchyard-overhead-ms": f"{overhead_ms:.2f}",
        }
        if self.rewrites:
            headers["x-switchyard-rewrites"] = ",".join(self.rewrites)
        if not self.stream:
            self.record.usage = answer.usage
            self._finish(CallOutcome.OK)
            return JsonReply(answer.prefix[0], headers=headers)
        return stream_reply(self, target, answer, headers)

    def _release_request(self, answer: Answer) -> None:
        """Past its commit point a stream reads nothing of its request again, and it may
        stream for minutes: let the client's body go now. Parsed, translated for the other
        kinds and viewed by continuity, it weighs several times its JSON, and an agent's
        history is often hundreds of KB: per open stream, the most it holds by far (the
        server's copy goes in ``routing.api.asgi``, the upstream request's here)."""
        if answer.reader is not None:
            answer.reader.release_request()
        released: dict[str, Any] = {}
        self.body = released
        self.prepared = Prepared(self.door, released)
        self.continuity.release()
        if self.door_continuity is not None:
            self.door_continuity.release()

    def _surface(self, failure: Failure) -> ErrorReply:
        status = failure.status if failure.status and 400 <= failure.status < 600 else 502
        log.warning(
            "surfaced call=%s group=%s code=%s status=%s: not a switch code here: %s",
            self.call_id,
            self.group.name,
            failure.code.value,
            status,
            failure.message,
        )
        self._finish(CallOutcome.FAILED, error_code=failure.code.value, http_status=status)
        said = failure.client_message
        if failure.public is not None and self.record.attempts:  # which provider, and how
            said = f"{self.record.attempts[-1].target} → {failure.code.value}: {said}"
        return ErrorReply(
            status=status,
            message=said,
            code=failure.code.value,
            type="invalid_request_error" if status < 500 else "upstream_error",
            headers=self._trail_headers(),
            door=self.door,
        )

    async def _exhausted(self) -> ErrorReply:
        group = self.group
        snapshot = await self.runtime.store.snapshot(group.keys, group.provider_names)
        now = self.runtime.clock()
        ended = Exhaustion(
            group.targets,
            snapshot.verdicts(group.members, now),
            self.outcomes,
            self.skipped,
            self.context_limit,
        )
        tried = bool(self.record.attempts)
        # The official SDKs honour this: the gateway already retried and switched, so a
        # client retry would replay the whole chain (SPEC §3.10).
        headers = {**self._trail_headers(), "x-should-retry": "false"}
        status = 502 if tried else 503
        waits = ended.revivals(now, all_waiting=tried)
        if waits:
            headers["retry-after"] = str(max(1, math.ceil(min(waits) - now)))
        message = ended.message(group.name)
        log.error(
            "exhausted call=%s group=%s status=%s: %s",
            self.call_id,
            group.name,
            status,
            ended.message(group.name, detail=True),
        )
        self._finish(CallOutcome.FAILED, error_code="ROUTES_EXHAUSTED", http_status=status)
        return ErrorReply(
            status=status,
            message=message,
            code="ROUTES_EXHAUSTED",
            type="upstream_error",
            headers=headers,
            door=self.door,
        )

    def _trail_headers(self) -> dict[str, str]:
        headers = {
            "x-switchyard-attempts": str(len(self.record.attempts)),
            "x-switchyard-request-id": self.call_id,
            "x-switchyard-trail": self.record.trail(),
        }
        last = self.record.attempts[-1] if self.record.attempts else None
        if last is not None and last.rewrites:
            headers["x-switchyard-rewrites"] = ",".join(last.rewrites)
        return headers

    def _finish(
        self, outcome: CallOutcome, *, error_code: str | None = None, http_status: int = 200
    ) -> None:
        record = self.record
        if record.elapsed_ms:  # already finished (e.g. cancelled after a reply was built)
            return
        record.outcome, record.error_code, record.http_status = outcome, error_code, http_status
        record.elapsed_ms = max((self.runtime.monotonic() - self.started) * 1000, 1e-3)
        # Every attempt that reported usage is paid for, each at its own target's price:
        # a retried, switched or rescued call costs more than its answer.
        tokens, by_key = 0, self.group.by_key
        for attempt in record.attempts:
            if attempt.usage:
                tokens += usage_tokens(attempt.usage)
                target = by_key.get(attempt.target)
                cost = cost_of(attempt.usage, target.price) if target is not None else None
                if cost is not None:
                    record.cost = cost if record.cost is None else record.cost + cost
        if self.admission is not None and self.gate is not None:
            self.gate.settle(self.admission, tokens, record.cost)
        self.runtime.calls_open -= 1
        if self.trace is not None:
            self.trace.finish(record)
        self.runtime.hub.publish(record)
