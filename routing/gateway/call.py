"""A call: one client request carried across attempts, retries and switches.

The loop, in SPEC §3 terms::

    pick a target (algorithm order → affinity → health: skip disabled/cooling/failed,
                   take the probe lease of a probe-eligible one, else force-revive)
      └─ attempt → Answer (commit point reached) → relay, record success
               └─ Failure → decide(): RETRY in place after a delay
                                      SWITCH: charge health once, record a fallback, pick again
                                      SURFACE: the client gets this error as-is
    nothing left → 502 ROUTES_EXHAUSTED (503 + Retry-After when nothing was even tried)

Health is charged once per target per call, when the call gives up on that target.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from routing.continuity.messages import MessagesHistory
from routing.continuity.responses import ResponsesHistory
from routing.engine.algorithms import SelectionView
from routing.engine.failures import PROVIDER_WIDE_CODES, Failure, FailureCode
from routing.engine.health import Availability, EventKind, HealthEvent, availability
from routing.engine.plan import Action, Decision, SwitchReason, context_window_allows, decide
from routing.events import AttemptRecord, CallRecord, FallbackEvent, RetryEvent
from routing.gateway.attempt import Answer, run_attempt
from routing.gateway.continuity import UNREWRITABLE, Continuity
from routing.gateway.replies import (
    SSE_DONE,
    ErrorReply,
    JsonReply,
    Reply,
    StreamReply,
    sse,
    sse_error,
)
from routing.protocols import Protocol
from routing.protocols.legs import Prepared, Relay, relay_for, translate_body
from routing.runtime import Runtime
from routing.state import Snapshot
from routing.table import GroupSpec, KeySpec, TargetSpec
from routing.upstream.openai import UpstreamFailure

# Failures that say nothing about the target's health: the request itself was the problem.
NOT_THE_TARGETS_FAULT = frozenset(
    {
        FailureCode.BAD_REQUEST,
        FailureCode.CONTENT_FILTER,
        FailureCode.CONTEXT_WINDOW_EXCEEDED,
        FailureCode.ABORTED,
    }
)
AFFINITY_TTL_S = 3600.0
DOOR_VIEWS: dict[Protocol, type[MessagesHistory] | type[ResponsesHistory]] = {
    Protocol.MESSAGES: MessagesHistory,
    Protocol.RESPONSES: ResponsesHistory,
}
log = logging.getLogger("switchyard.gateway")
PROBE_LEASE_CAP_S = 120.0


@dataclass(slots=True)
class TargetOutcome:
    failure: Failure
    attempts: int
    elapsed_ms: float


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
    ) -> None:
        """``started`` is the loop time the request reached the gateway (the ASGI entry), so
        ``x-switchyard-overhead-ms`` covers body reading, routing and the view, not just us.

        ``door`` is the protocol the client speaks; ``prepared`` its request translated for
        every kind of the group (``routing.protocols.legs``; None: chat door, chat targets).
        ``endpoint`` ``"embeddings"`` sends the body as-is to ``<base>/embeddings``;
        ``skipped`` targets (key → why) are never tried and say why in an exhaustion;
        ``protocol_headers`` (the door's ``anthropic-beta``…) go to same-protocol targets."""
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
        self.loop = asyncio.get_running_loop()
        self.started = started if started is not None else self.loop.time()
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
        # (a context window was exceeded, the declared window of the target it happened on)
        self.context_limit: tuple[bool, int | None] = (False, None)
        self.track_inflight = group.algorithm.uses_inflight
        self.track_latency = group.algorithm.uses_latency
        self.clean: set[str] = set()  # targets picked with no health state at all
        # Continuity reads the canonical (chat) view, whatever the door.
        self.continuity = Continuity(runtime.store, self.prepared.canonical, session)
        # A Messages or Responses pass-through rewrites the door's own shape, losslessly.
        view = DOOR_VIEWS.get(door)
        self.door_continuity = (
            Continuity(runtime.store, body, session, view=view) if view is not None else None
        )
        self.rewrites: list[str] = []  # of the attempt that answered (x-switchyard-rewrites)
        runtime.calls_open += 1  # until _finish: what a drain (shutdown, a test's end) waits for

    # ------------------------------------------------------------------ main loop
    async def run(self) -> Reply:
        try:
            return await self._run()
        except asyncio.CancelledError:
            self._finish("aborted", error_code=FailureCode.ABORTED.value, http_status=499)
            raise
        except Exception:
            # A bug, not an upstream's failure: still on the record, never left open.
            self._finish("failed", error_code=FailureCode.UNKNOWN.value, http_status=500)
            raise

    async def _run(self) -> Reply:
        store = self.runtime.store
        ticket = await store.next_ticket(self.group.name) if self.group.algorithm.uses_ticket else 0
        switched_from: tuple[TargetSpec, Failure, str, float | None] | None = None
        while True:
            pick = await self._pick(ticket)
            if switched_from is not None:
                self._publish_fallback(*switched_from, to=pick[0] if pick else None)
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
                self.context_limit = (True, target.context_window)
            cooldown = next((e.cooldown_s for e in events if e.kind is EventKind.COOLING), None)
            reason = self._switch_reason(decision, events)
            switched_from = (target, failure, reason, cooldown)

    # ------------------------------------------------------------------ selection
    async def _pick(self, ticket: int) -> tuple[TargetSpec, bool] | None:
        group, store = self.group, self.runtime.store
        if self.loop.time() >= self.deadline:
            return None  # the call's deadline: stop here rather than charge targets for it
        snapshot = await store.snapshot(group.keys, group.provider_names)
        now = self.runtime.clock()
        order = group.algorithm.order(
            SelectionView(ticket=ticket, inflight=snapshot.inflight, latency_ms=snapshot.latency_ms)
        )
        by_key = group.by_key
        ordered = [by_key[c.key] for c in order]
        if self.session:
            sticky = await store.affinity_get(self.session)
            if sticky in by_key and sticky not in self.failed:
                ordered.sort(key=lambda t: t.key != sticky)  # stable: only the sticky one moves
        cooling: list[tuple[float, TargetSpec]] = []
        for target in ordered:
            if target.key in self.failed or not self._context_allows(target):
                continue
            provider_health = snapshot.providers.get(target.provider.name)
            if provider_health is not None and provider_health.disabled:
                continue
            health = snapshot.targets.get(target.key)
            state = availability(health, now) if health is not None else Availability.AVAILABLE
            if state is Availability.AVAILABLE:
                if health is None:
                    self.clean.add(target.key)
                return target, False
            if state is Availability.PROBE_ELIGIBLE:
                lease = min(target.provider.timeouts.total_s, PROBE_LEASE_CAP_S)
                if await store.try_begin_probe(target.key, now, lease):
                    return target, True
            elif state is Availability.COOLING and health is not None:
                cooling.append((health.until, target))
        # Nothing eligible: force-revive the cooling target that expires first, so the
        # model stays up instead of failing while a route may well have recovered.
        for _until, target in sorted(cooling, key=lambda item: item[0]):
            events = await store.force_revive(target.key, now)
            if events:
                self.runtime.hub.publish_all(events)
                return target, True
        return None

    def _context_allows(self, target: TargetSpec) -> bool:
        hit, window = self.context_limit
        return not hit or context_window_allows(window, target.context_window)

    # ------------------------------------------------------------------ attempts
    async def _use_target(
        self, target: TargetSpec, probe: bool
    ) -> Answer | tuple[Decision, Failure]:
        if target.provider.config_error:
            return self._unsendable(target, probe)
        client = self.runtime.client_for(target.provider)
        kind = Protocol(target.provider.kind)
        rewrites: list[str] = []
        if self.endpoint:  # embeddings: no history to rewrite
            body = orjson.dumps({**self.body, "model": target.model})
        elif kind is self.door and self.door_continuity is not None:
            outbound, rewrites = await self.door_continuity.outbound(target)
            body = orjson.dumps(outbound)
        else:
            outbound, rewrites = await self.continuity.outbound(target)
            body, rewrites = self._outbound_bytes(kind, target, outbound, rewrites)
        # orjson's output keeps its growth buffer (about twice the body); the request, and
        # with it the body, lives as long as the stream: keep an exact-size copy.
        body = bytes(memoryview(body))
        store, group = self.runtime.store, self.group
        group.algorithm.on_dispatch(target.candidate)
        tries = 0
        first_started = self.loop.time()
        while True:
            tries += 1
            attempt_started = self.loop.time()
            if self.track_inflight:
                await store.inflight_add(target.key, 1)
            committed = False
            try:
                answer = await run_attempt(
                    client,
                    body,
                    stream=self.stream,
                    commit=group.commit,
                    model=target.model,
                    deadline=self.deadline,
                    door=self.door,
                    kind=kind,
                    endpoint=self.endpoint,
                    headers=self.protocol_headers if kind is self.door else None,
                )
                committed = True
            except UpstreamFailure as exc:
                failure = exc.failure
            except asyncio.CancelledError:
                self._attempt(
                    target,
                    tries,
                    attempt_started,
                    ok=False,
                    probe=probe,
                    code="ABORTED",
                    rewrites=rewrites,
                )
                if probe:  # no verdict: let the next call probe instead of waiting out the lease
                    await store.release_probe(target.key, self.runtime.clock())
                raise
            finally:
                self.upstream_s += self.loop.time() - attempt_started
                if self.track_inflight and not (committed and answer.reader is not None):
                    await store.inflight_add(target.key, -1)
            if committed:
                self._attempt(
                    target, tries, attempt_started, ok=True, probe=probe, rewrites=rewrites
                )
                self.rewrites = rewrites
                return answer
            record = self._attempt(
                target,
                tries,
                attempt_started,
                ok=False,
                probe=probe,
                failure=failure,
                rewrites=rewrites,
            )
            decision = decide(
                failure,
                retries_done=tries - 1,
                policy=group.retry,
                switch_codes=group.switch_codes,
                is_probe=probe,
                time_left_s=self.deadline - self.loop.time(),
                rand=self.runtime.rand,
            )
            if decision.action is not Action.RETRY:
                self.outcomes[target.key] = TargetOutcome(
                    failure, tries, (self.loop.time() - first_started) * 1000
                )
                group.algorithm.on_failure(target.candidate, failure.code)
                return decision, failure
            record.will_retry = True
            self.runtime.hub.publish(
                RetryEvent(
                    call_id=self.call_id,
                    group=group.name,
                    target=target.key,
                    try_number=tries,
                    code=failure.code.value,
                    status=failure.status,
                    delay_s=decision.delay_s,
                    message=failure.message,
                )
            )
            slept_from = self.loop.time()
            await self.runtime.sleep(decision.delay_s)
            self.upstream_s += self.loop.time() - slept_from

    def _outbound_bytes(
        self, kind: Protocol, target: TargetSpec, outbound: dict[str, Any], rewrites: list[str]
    ) -> tuple[bytes, list[str]]:
        """The attempt's body in the target's protocol, and every rewrite made to it.

        ``outbound`` is the continuity-rewritten canonical body. Chat to chat sends it as
        is; a cross-protocol target gets it translated (the door's request was already
        checked translatable at the door); a same-protocol target other than chat gets the
        door's body with only ``model`` rewritten (a Messages or Responses pass-through is
        rewritten in its own shape before this, so this is only a safety net)."""
        if kind is Protocol.CHAT and self.door is Protocol.CHAT:
            return orjson.dumps(outbound), rewrites
        notes = list(self.prepared.notes.get(kind, ()))
        if kind is self.door:
            skipped = [UNREWRITABLE] if rewrites else []
            return self.prepared.request(kind, target.model), skipped
        if not rewrites:
            return self.prepared.request(kind, target.model), notes
        body, translation = translate_body(kind, outbound, target.model)
        return body, rewrites + translation

    def _unsendable(self, target: TargetSpec, probe: bool) -> tuple[Decision, Failure]:
        """A stored credential or header no request can carry (SPEC §9): a configuration
        failure of this target, recorded like any attempt, and the call moves on."""
        failure = Failure(FailureCode.MISSING_CREDENTIAL, target.provider.config_error)
        self._attempt(target, 1, self.loop.time(), ok=False, probe=probe, failure=failure)
        decision = decide(
            failure,
            retries_done=0,
            policy=self.group.retry,
            switch_codes=self.group.switch_codes,
            is_probe=probe,
            time_left_s=self.deadline - self.loop.time(),
            rand=self.runtime.rand,
        )
        self.outcomes[target.key] = TargetOutcome(failure, 1, 0.0)
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
            elapsed_ms=(self.loop.time() - started) * 1000,
            code=failure.code.value if failure else code,
            status=failure.status if failure else None,
            message=failure.message if failure else "",
            probe=probe,
            rewrites=tuple(rewrites or ()),
            kind=target.provider.kind,
        )
        self.record.attempts.append(record)
        return record

    async def _charge(self, target: TargetSpec, failure: Failure, probe: bool) -> list[HealthEvent]:
        """Charge the target's health once for this call (SPEC §3.9)."""
        store, now = self.runtime.store, self.runtime.clock()
        if failure.code in PROVIDER_WIDE_CODES:
            events = await store.disable_provider(target.provider.name, failure, now)
        elif failure.code in self.group.switch_codes and failure.code not in NOT_THE_TARGETS_FAULT:
            events = await store.record_failure(
                target.key, failure, target.circuit or self.group.circuit, now, was_probe=probe
            )
        elif probe:
            # The target answered; the request was at fault. It is alive: end the probe.
            events = await store.record_success(target.key, now, None)
        else:
            events = []
        self.runtime.hub.publish_all(events)
        return events

    def _switch_reason(self, decision: Decision, events: list[HealthEvent]) -> str:
        if decision.reason is SwitchReason.PROBE:
            return SwitchReason.PROBE.value
        if decision.reason is SwitchReason.RETRY_EXHAUSTED:
            return SwitchReason.RETRY_EXHAUSTED.value
        if any(e.kind is EventKind.COOLING for e in events):
            return SwitchReason.THRESHOLD.value
        return SwitchReason.NOT_RETRYABLE.value

    def _publish_fallback(
        self,
        source: TargetSpec,
        failure: Failure,
        reason: str,
        cooldown: float | None,
        *,
        to: TargetSpec | None,
    ) -> None:
        last = self.record.attempts[-1] if self.record.attempts else None
        if last is not None:
            last.switched, last.switched_to, last.reason = True, to.key if to else None, reason
        self.runtime.hub.publish(
            FallbackEvent(
                call_id=self.call_id,
                group=self.group.name,
                from_target=source.key,
                to_target=to.key if to else None,
                reason=reason,
                code=failure.code.value,
                status=failure.status,
                message=failure.message,
                cooldown_s=cooldown,
            )
        )

    # ------------------------------------------------------------------ endings
    async def _commit(self, target: TargetSpec, answer: Answer, probe: bool) -> Reply:
        store = self.runtime.store
        ttft_ms = answer.ttft_s * 1000 if answer.ttft_s is not None else None
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
        committed_at = self.loop.time()
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
            self._finish("ok")
            return JsonReply(answer.prefix[0], headers=headers)
        kind = Protocol(target.provider.kind)
        if kind is Protocol.CHAT and self.door is Protocol.CHAT:
            return StreamReply(self._relay(target, answer), headers=headers)
        relay = relay_for(self.door, kind, self.body)
        return StreamReply(self._relay_leg(target, answer, relay), headers=headers)

    async def _relay(self, target: TargetSpec, answer: Answer) -> AsyncIterator[bytes]:
        """Send the held-back prefix, then the live rest. After the commit point a failure
        is surfaced as an SSE error event: no retry, no switch, never a fake clean end."""
        reader = answer.reader
        usage_sent = False
        outcome, error_code = "ok", None
        try:
            held: list[bytes] = []
            for payload in answer.prefix:
                if _is_usage_only(payload):
                    if usage_sent:
                        continue
                    usage_sent = True
                held.append(sse(payload))
            yield b"".join(held)
            if reader is not None:
                while True:
                    try:
                        batch = await reader.next_batch()
                    except UpstreamFailure as exc:
                        failure = exc.failure
                        outcome, error_code = "failed", failure.code.value
                        log.warning(
                            "failed after content call=%s group=%s target=%s code=%s: %s "
                            "(surfaced as an SSE error: too late to retry or switch)",
                            self.call_id,
                            self.group.name,
                            target.key,
                            failure.code.value,
                            failure.message,
                        )
                        yield sse_error(failure.message, code=failure.code.value)
                        # Too late to switch, but a target that cuts streams still pays.
                        await self._charge(target, failure, probe=False)
                        return
                    if batch is None:
                        break
                    out: list[bytes] = []
                    for payload, chunk, _ in batch:
                        if chunk.get("usage") and not chunk.get("choices"):
                            if usage_sent:
                                continue
                            usage_sent = True
                        out.append(sse(payload))
                    if out:  # everything one network read brought, in one write
                        yield b"".join(out)
                # Before [DONE]: a client's next request must find this turn remembered.
                await self.continuity.remember(target, answer.turn)
            yield SSE_DONE
        except (asyncio.CancelledError, GeneratorExit):
            outcome, error_code = "aborted", FailureCode.ABORTED.value
            raise
        finally:
            await self._stream_ended(target, answer, outcome, error_code)

    async def _relay_leg(
        self, target: TargetSpec, answer: Answer, relay: Relay
    ) -> AsyncIterator[bytes]:
        """``_relay`` for every other door/kind pair: the same commit rules, the door's own
        framing, end and after-commit error event (``routing.protocols.legs``)."""
        reader = answer.reader
        outcome, error_code = "ok", None
        try:
            yield relay.encode(answer.items)
            if reader is not None:
                while True:
                    try:
                        batch = await reader.next_batch()
                    except UpstreamFailure as exc:
                        failure = exc.failure
                        outcome, error_code = "failed", failure.code.value
                        log.warning(
                            "failed after content call=%s group=%s target=%s code=%s: %s "
                            "(surfaced as the door's error event: too late to retry or switch)",
                            self.call_id,
                            self.group.name,
                            target.key,
                            failure.code.value,
                            failure.message,
                        )
                        yield relay.error(failure.message, code=failure.code.value)
                        await self._charge(target, failure, probe=False)
                        return
                    if batch is None:
                        break
                    out = relay.encode(batch)
                    if out:
                        yield out
                # Before the end: a client's next request must find this turn remembered.
                await self.continuity.remember(target, answer.turn)
            tail = relay.end()
            if tail:
                yield tail
        except (asyncio.CancelledError, GeneratorExit):
            outcome, error_code = "aborted", FailureCode.ABORTED.value
            raise
        finally:
            await self._stream_ended(target, answer, outcome, error_code)

    async def _stream_ended(
        self, target: TargetSpec, answer: Answer, outcome: str, error_code: str | None
    ) -> None:
        reader = answer.reader
        if reader is not None:
            self.record.usage = reader.usage
            await reader.aclose()
            if self.track_inflight:
                await self.runtime.store.inflight_add(target.key, -1)
        else:
            self.record.usage = answer.usage
        self._finish(outcome, error_code=error_code)

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
        self._finish("failed", error_code=failure.code.value, http_status=status)
        return ErrorReply(
            status=status,
            message=failure.message,
            code=failure.code.value,
            type="invalid_request_error" if status < 500 else "upstream_error",
            headers=self._trail_headers(),
            door=self.door,
        )

    async def _exhausted(self) -> ErrorReply:
        group = self.group
        snapshot = await self.runtime.store.snapshot(group.keys, group.provider_names)
        now = self.runtime.clock()
        tried = bool(self.record.attempts)
        lines, revivals = self._target_lines(snapshot, now)
        # The official SDKs honour this: the gateway already retried and switched, so a
        # client retry would replay the whole chain (SPEC §3.10).
        headers = {**self._trail_headers(), "x-should-retry": "false"}
        status = 502 if tried else 503
        waits = revivals if not tried else self._revivals_if_all_waiting(snapshot, now)
        if waits:
            headers["retry-after"] = str(max(1, math.ceil(min(waits) - now)))
        message = f"All routes for '{self.group.name}' failed:\n" + "\n".join(lines)
        log.error(
            "exhausted call=%s group=%s status=%s: %s", self.call_id, group.name, status, message
        )
        self._finish("failed", error_code="ROUTES_EXHAUSTED", http_status=status)
        return ErrorReply(
            status=status,
            message=message,
            code="ROUTES_EXHAUSTED",
            type="upstream_error",
            headers=headers,
            door=self.door,
        )

    def _target_lines(self, snapshot: Snapshot, now: float) -> tuple[list[str], list[float]]:
        """One line per target of the group: its failure in this call, or why it was skipped."""
        lines: list[str] = []
        revivals: list[float] = []
        for target in self.group.targets:
            outcome = self.outcomes.get(target.key)
            if outcome is not None:
                f = outcome.failure
                status = f" (HTTP {f.status})" if f.status is not None else ""
                lines.append(
                    f"{target.key} → {f.code.value}{status}: {f.message} "
                    f"({outcome.elapsed_ms:.0f} ms, {outcome.attempts} attempt{'s' if outcome.attempts != 1 else ''})"
                )
                continue
            provider_health = snapshot.providers.get(target.provider.name)
            health = snapshot.targets.get(target.key)
            if target.key in self.skipped:
                lines.append(f"{target.key} → skipped: {self.skipped[target.key]}")
            elif provider_health is not None and provider_health.disabled:
                lines.append(f"{target.key} → disabled: {provider_health.code}")
            elif health is not None and availability(health, now) is Availability.DISABLED:
                lines.append(f"{target.key} → disabled: {health.last_code}: {health.last_message}")
            elif health is not None and availability(health, now) is Availability.COOLING:
                revivals.append(health.until)
                lines.append(
                    f"{target.key} → cooling for {max(1, math.ceil(health.until - now))} s"
                )
            elif health is not None and availability(health, now) is Availability.PROBING:
                revivals.append(health.probe_lease_until)
                lines.append(f"{target.key} → probing: another call is testing it")
            elif not self._context_allows(target):
                lines.append(
                    f"{target.key} → skipped: its context window is not larger than the one exceeded"
                )
            else:
                lines.append(f"{target.key} → not tried")
        return lines, revivals

    def _revivals_if_all_waiting(self, snapshot: Snapshot, now: float) -> list[float]:
        """When every target is cooling or rate limited, when each may serve again;
        otherwise nothing (a target that failed some other way has no known revival)."""
        waits: list[float] = []
        for target in self.group.targets:
            health = snapshot.targets.get(target.key)
            outcome = self.outcomes.get(target.key)
            if health is not None and availability(health, now) is Availability.COOLING:
                waits.append(health.until)
            elif health is not None and availability(health, now) is Availability.PROBING:
                waits.append(health.probe_lease_until)
            elif (
                outcome is not None
                and outcome.failure.code is FailureCode.RATE_LIMIT
                and outcome.failure.retry_after_s is not None
            ):
                waits.append(now + outcome.failure.retry_after_s)
            else:
                return []
        return waits

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
        self, outcome: str, *, error_code: str | None = None, http_status: int = 200
    ) -> None:
        record = self.record
        if record.elapsed_ms:  # already finished (e.g. cancelled after a reply was built)
            return
        record.outcome, record.error_code, record.http_status = outcome, error_code, http_status
        record.elapsed_ms = max((self.loop.time() - self.started) * 1000, 1e-3)
        self.runtime.calls_open -= 1
        self.runtime.hub.publish(record)


def _is_usage_only(payload: bytes) -> bool:
    if b'"usage"' not in payload:
        return False
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return bool(chunk.get("usage")) and not chunk.get("choices")
