"""Carry out a mid-stream rescue (SPEC §16; the rules are ``routing.engine.rescue``).

A committed chat stream was cut or stalled while producing text, in a group with
``resume: continuation``: ask the next eligible target for the rest, and relay only what
the client does not have yet. :func:`continue_elsewhere` yields the bytes to write after
what the client already got and reports how it ended in :class:`Rescue`; a rescue that
cannot finish ends with the error event, exactly as an unrescued stream would.

Chat door with chat targets only for now: the Messages and Responses doors, and other
upstream kinds behind the chat door, still surface the honest error event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from routing.engine.failures import Failure, FailureCode
from routing.engine.plan import CommitPoint
from routing.engine.rescue import (
    Match,
    Partial,
    Reproduction,
    RescueMode,
    rejects_prefill,
    rescue_mode,
)
from routing.gateway.attempt import run_attempt
from routing.gateway.replies import SSE_DONE, sse, sse_error
from routing.protocols import Protocol
from routing.protocols.legs import Item
from routing.upstream.openai import UpstreamFailure

if TYPE_CHECKING:
    from routing.gateway.call import Call
    from routing.gateway.table import TargetSpec

log = logging.getLogger("switchyard.gateway")


@dataclass(slots=True)
class Rescue:
    """How a rescue went: ``ok`` once the rest reached the client and the stream ended."""

    ok: bool = False
    target: str | None = None
    mode: RescueMode | None = None
    usage: dict[str, Any] | None = None
    failure: Failure | None = None
    tried: list[str] = field(default_factory=list)


def _with_prefill(body: dict[str, Any], text: str) -> dict[str, Any]:
    messages = list(body.get("messages") or ())
    return {**body, "messages": [*messages, {"role": "assistant", "content": text}]}


def _content(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return None
    content = delta.get("content")
    return content if isinstance(content, str) else ""


def _with_content(chunk: dict[str, Any], text: str) -> dict[str, Any]:
    choice = dict(chunk["choices"][0])
    choice["delta"] = {**choice["delta"], "content": text}
    return {**chunk, "choices": [choice, *chunk["choices"][1:]]}


async def continue_elsewhere(
    call: Call, failed: TargetSpec, partial: Partial, rescue: Rescue
) -> AsyncIterator[bytes]:
    """Continue a cut chat stream on the next eligible target (see the module docstring)."""
    call.failed.add(failed.key)
    runtime = call.runtime
    while True:
        pick = await call._pick(0)
        if pick is None:
            return
        target, probe = pick
        mode = rescue_mode(
            prefill=target.prefill, learned_no_prefill=target.key in runtime.no_prefill
        )
        outbound, _ = await call.continuity.outbound(target)
        if mode is RescueMode.PREFILL:
            outbound = _with_prefill(outbound, partial.text)
        started = call.loop.time()
        rescue.tried.append(target.key)
        try:
            answer = await run_attempt(
                runtime.client_for(target.provider),
                orjson.dumps({**outbound, "model": target.model}),
                stream=True,
                commit=CommitPoint.FIRST_CONTENT,
                model=target.model,
                deadline=call.deadline,
                door=Protocol.CHAT,
                kind=Protocol.CHAT,
            )
        except UpstreamFailure as exc:
            f = exc.failure
            record = call._attempt(target, 1, started, ok=False, probe=probe, failure=f)
            record.continuation = True
            if mode is RescueMode.PREFILL and rejects_prefill(f.code, f.status):
                # Learned: it does not take a prefill. The request was at fault, not the
                # target: no health charge; the next round restarts there instead.
                runtime.no_prefill.add(target.key)
                if probe:
                    await runtime.store.release_probe(target.key, runtime.clock())
                continue
            await call._charge(target, f, probe)
            call.failed.add(target.key)
            continue
        record = call._attempt(target, 1, started, ok=True, probe=probe)
        record.continuation = True
        rescue.target, rescue.mode = target.key, mode
        log.warning(
            "rescuing call=%s group=%s from=%s to=%s mode=%s after %d characters",
            call.call_id,
            call.group.name,
            failed.key,
            target.key,
            mode.value,
            len(partial.text),
        )
        async for out in _relay_rest(answer.items, answer.reader, partial, mode, rescue):
            yield out
        return


async def _relay_rest(
    items: list[Item],
    reader: Any,
    partial: Partial,
    mode: RescueMode,
    rescue: Rescue,
) -> AsyncIterator[bytes]:
    """The rescue stream's chunks the client does not have yet, then ``[DONE]``; a restart
    that diverges, or a second break, ends in the error event."""
    reproduction = Reproduction(partial.text) if mode is RescueMode.RESTART else None
    passed = reproduction is None
    try:
        batch: list[Item] | None = items
        while batch is not None:
            out: list[bytes] = []
            for payload, chunk, _ in batch:
                if not chunk.get("choices"):
                    out.append(payload)  # usage-only: the client's one usage chunk
                    continue
                if passed:
                    out.append(payload)
                    continue
                assert reproduction is not None
                verdict, surplus = reproduction.feed(_content(chunk) or "")
                if verdict is Match.DIVERGED:
                    rescue.failure = Failure(
                        FailureCode.TRANSPORT,
                        "the stream was cut and a restart elsewhere diverged from the text "
                        "already sent: not spliced",
                    )
                    yield b"".join(out) + sse_error(
                        rescue.failure.message, code=rescue.failure.code.value
                    )
                    return
                if verdict is Match.PASSED:
                    passed = True
                    choice = chunk["choices"][0]
                    if surplus or choice.get("finish_reason"):
                        out.append(orjson.dumps(_with_content(chunk, surplus)))
            if out:
                yield b"".join(sse(p) for p in out)
            if reader is None:
                break
            try:
                batch = await reader.next_batch()
            except UpstreamFailure as exc:
                rescue.failure = exc.failure
                yield sse_error(exc.failure.message, code=exc.failure.code.value)
                return
        rescue.ok = passed
        if not passed:  # the restart ended before reproducing what the client has
            rescue.failure = Failure(
                FailureCode.TRANSPORT, "a restart elsewhere ended before reaching the cut"
            )
            yield sse_error(rescue.failure.message, code=rescue.failure.code.value)
            return
        yield SSE_DONE
    finally:
        if reader is not None:
            rescue.usage = reader.usage
            await reader.aclose()
