"""One call's state and the operations on it, apart from the loop that runs it.

As tenacity keeps ``RetryCallState`` apart from its retry loop, a call's record lives
here (:class:`CallState`: the request, its deadline, what each target did, the record
being written) with the public operations the gateway's parts carry out on it: record an
:meth:`~CallState.attempt`, :meth:`~CallState.charge` a target's health, build a target's
:meth:`~CallState.outbound` request, :meth:`~CallState.release_request` past the commit
point, :meth:`~CallState.finish` the record once. The loop over targets
(``routing.gateway.call``), the target walker (``routing.gateway.walk``), one target's
tries (``routing.gateway.retry``), the relay past the commit point
(``routing.gateway.relay``) and its rescue (``routing.gateway.rescue``) take a
``CallState`` and use only this interface: none of them imports another's privates, and
none imports the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson

from routing.continuity.system import FOLDED, fold_mid_system, has_mid_system, refuses_mid_system
from routing.engine.failures import Failure
from routing.engine.health import HealthEvent
from routing.engine.plan import ContextLimit
from routing.engine.rescue import Resume
from routing.engine.select import Charge, charge
from routing.gateway.continuity import UNREWRITABLE, Continuity, Scope
from routing.gateway.events import AttemptRecord, CallOutcome, CallRecord
from routing.limits.spec import billed_usage, cost_of
from routing.protocols import Protocol
from routing.protocols.betas import filter_betas
from routing.protocols.legs import Prepared, translate_body, wire_body
from routing.protocols.registry import PROTOCOLS

if TYPE_CHECKING:
    from routing.gateway.attempt import Answer
    from routing.gateway.runtime import Runtime
    from routing.gateway.table import GroupSpec, KeySpec, TargetSpec
    from routing.limits.gate import Admission, LimitGate
    from routing.observability.spans import CallTrace

log = logging.getLogger("switchyard.gateway")


@dataclass(slots=True)
class TargetOutcome:
    """How a call's attempts on a target it gave up on ended (the exhaustion message)."""

    failure: Failure
    attempts: int
    elapsed_ms: float  # on the target: its attempts and the waits between them
    last_ms: float  # the last attempt alone
    cooldown_s: float | None = None  # the cooling giving up on it earned the target


@dataclass(frozen=True, slots=True)
class Outbound:
    """One target's request, ready to send as often as it is tried."""

    kind: Protocol  # the target's protocol
    body: bytes
    headers: Mapping[str, str] | None  # the door's protocol headers it may carry
    rewrites: list[str]  # what the outbound copy changed (x-switchyard-rewrites)


class CallState:
    """One client request carried across attempts, retries and switches: its record."""

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
        self.rescuable = group.resume is not Resume.OFF and stream and not endpoint
        self.key = key
        self.admission: Admission | None = None  # limits taken for this call (SPEC §17)
        self.gate: LimitGate | None = None  # where they were taken (settled there at the end)
        self.served: AttemptRecord | None = None  # the committed attempt (its usage at the end)
        runtime.calls_open += 1  # until finish (switchyard_calls_in_progress on /metrics)

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

    @property
    def asked_for(self) -> str:
        """The model name the client asked for (a group, alias or direct name): every
        answer's ``model`` (SPEC §3, step 11; the concrete one is ``x-switchyard-target``)."""
        model = self.body.get("model")
        return model if isinstance(model, str) else self.group.name

    def _start_trace(self, headers: Mapping[str, str] | None) -> CallTrace:
        assert self.runtime.tracing is not None
        trace = self.runtime.tracing.start_call(
            headers=headers,
            started_ns=time.time_ns() - int((self.runtime.monotonic() - self.started) * 1e9),
            door=self.record.door,
            endpoint=self.endpoint,
            requested_model=self.asked_for,
            group=self.group.name,
            key_name=self.record.key_name,
            request_id=self.call_id,
            stream=self.stream,
            commit=self.group.commit.value,
        )
        self.record.trace_id = trace.trace_id
        return trace

    # ------------------------------------------------------------------ the request
    async def outbound(self, target: TargetSpec) -> Outbound:
        """The request for ``target``, built once for all its tries: continuity-rewritten
        and in its protocol, with the door's protocol headers a same-kind target may carry
        (its betas filtered), and every rewrite made on the way."""
        kind = target.provider.protocol.kind
        rewrites: list[str] = []
        if self.endpoint:  # embeddings: no history to rewrite
            body = orjson.dumps({**self.body, "model": target.model})
        elif kind is self.door and self.door_continuity is not None:
            outbound, rewrites = await self.door_continuity.outbound(target)
            body, signed = wire_body(kind, outbound, target.model)
            rewrites = [*rewrites, *signed]
        else:
            outbound, rewrites = await self.continuity.outbound(target)
            if target.key in self.runtime.no_mid_system and has_mid_system(outbound):
                outbound, rewrites = fold_mid_system(outbound), [*rewrites, FOLDED]
            body, rewrites = self.body_for(kind, target, outbound, rewrites)
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

    def learned_no_mid_system(
        self, target: TargetSpec, outbound: Outbound, failure: Failure
    ) -> bool:
        """A chat target just refused a system message mid-conversation (a 400 about system
        messages; ``routing.continuity.system``): learned, when this request had one."""
        learned = self.runtime.no_mid_system
        if (
            outbound.kind is not Protocol.CHAT
            or target.key in learned
            or not refuses_mid_system(failure.status, failure.message)
            or not has_mid_system(self.prepared.canonical)
        ):
            return False
        learned.add(target.key)
        log.warning(
            "learned: target=%s takes no system message mid-conversation (%s); folding them "
            "into user turns from now on",
            target.key,
            failure.message,
        )
        return True

    def body_for(
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

    def release_request(self, answer: Answer) -> None:
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

    # ------------------------------------------------------------------ the record
    def attempt(
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
        """Record an attempt on ``target`` (its ``tries``-th, dispatched at ``started``
        on the runtime's ``monotonic``): on the call's record and its trace."""
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

    async def charge(self, target: TargetSpec, failure: Failure, probe: bool) -> list[HealthEvent]:
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
        # each transition names the call that caused it (the last target's cooling too)
        events = [replace(event, call_id=self.call_id) for event in events]
        self.runtime.hub.publish_all(events)
        return events

    def cooled(self, target: TargetSpec, cooldown_s: float | None) -> None:
        """Put the cooling giving up on ``target`` earned on its last attempt's record and
        its outcome (the exhaustion line), before the call moves on or ends."""
        if cooldown_s is None:
            return
        if self.record.attempts and self.record.attempts[-1].target == target.key:
            self.record.attempts[-1].cooldown_s = cooldown_s
        outcome = self.outcomes.get(target.key)
        if outcome is not None:
            outcome.cooldown_s = cooldown_s

    def trail_headers(self) -> dict[str, str]:
        """The headers every error reply of the call carries: its attempts and trail."""
        headers = {
            "x-switchyard-attempts": str(len(self.record.attempts)),
            "x-switchyard-request-id": self.call_id,
            "x-switchyard-trail": self.record.trail(),
        }
        last = self.record.attempts[-1] if self.record.attempts else None
        if last is not None and last.rewrites:
            headers["x-switchyard-rewrites"] = ",".join(last.rewrites)
        return headers

    def finish(
        self, outcome: CallOutcome, *, error_code: str | None = None, http_status: int = 200
    ) -> None:
        """End the record once (a later call is a no-op): its time and cost, the limits
        it took settled, its trace ended, the record published."""
        record = self.record
        if record.elapsed_ms:  # already finished (e.g. cancelled after a reply was built)
            return
        record.outcome, record.error_code, record.http_status = outcome, error_code, http_status
        record.elapsed_ms = max((self.runtime.monotonic() - self.started) * 1000, 1e-3)
        # Every attempt that reported usage is paid for, each at its own target's price:
        # a retried, switched or rescued call costs more than its answer. Its tokens and
        # its cost count the same attempts, in the budgets and on the ledger alike.
        by_key = self.group.by_key
        for attempt in record.attempts:
            if attempt.usage:
                target = by_key.get(attempt.target)
                attempt.cost = None if target is None else cost_of(attempt.usage, target.price)
                if attempt.cost is not None:
                    record.cost = attempt.cost + (record.cost or 0.0)
        record.billed = billed_usage(attempt.usage for attempt in record.attempts)
        if self.admission is not None and self.gate is not None:
            tokens = record.billed["total_tokens"] if record.billed else 0
            self.gate.settle(self.admission, tokens, record.cost)
        self.runtime.calls_open -= 1
        if self.trace is not None:
            self.trace.finish(record)
        self.runtime.hub.publish(record)
