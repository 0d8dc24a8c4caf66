"""Counting a request's input tokens (``POST /v1/messages/count_tokens``, SPEC §15, and the
Gemini door's ``:countTokens``, §20): the group's first target that can count the door's
request (:func:`counter`: an ``anthropic`` target for either door, the request translated
for it from Gemini's; a ``gemini`` target for the Gemini door) and answers gives its own
count, with its status, in the door's shape; its 4xx about the request is the door's
own (never a 200 estimate); the estimate only when no target of the group can count, and a
502 when every one that can failed. Every answer names itself as a call's does
(``x-switchyard-request-id``, ``-attempts``, ``-trail``, ``-target``). Not a call: nothing
is generated, so nothing is charged, retried or recorded.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from routing.engine.failures import FailureCode
from routing.gateway.replies import ErrorReply, JsonReply
from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec, TargetSpec
from routing.protocols import Protocol, Unmappable
from routing.protocols.betas import filter_betas
from routing.protocols.gemini import request as gemini_request
from routing.protocols.legs import wire_body
from routing.protocols.messages import request as messages_request
from routing.upstream.base import UpstreamFailure
from routing.upstream.openai import OpenAIClient

COUNT_TOKENS_LIMIT = 1 << 20  # an upstream count is a small JSON object
# An upstream's answer about the request itself: the client's to fix, whichever target.
# A count is no generation: its answer comes at once, whatever first_token_s allows a
# thinking model (docs/outages.md).
COUNT_CAP_S = 60.0
ABOUT_THE_REQUEST = (FailureCode.BAD_REQUEST, FailureCode.CONTEXT_WINDOW_EXCEEDED)


# A Messages count_tokens request's fields (what an anthropic target counts).
_COUNTED = ("messages", "system", "tools", "tool_choice", "thinking")
Counter = tuple[str, bytes, Callable[[bytes], bytes]]  # path, body, the answer for the door


def counter(
    door: Protocol, target: TargetSpec, client: OpenAIClient, body: dict[str, Any]
) -> Counter | None:
    """How ``target`` counts the ``door``'s request: the URL on its platform, the body,
    and its answer in the door's shape; None when its kind or platform cannot count it."""
    kind = target.provider.protocol.kind
    if kind is Protocol.MESSAGES:
        path = client.count_tokens_url(target.model)  # on its platform (SPEC §19)
        if path is None:
            return None
        if door is Protocol.MESSAGES:
            counted = body
            answer = client.count_tokens_answer
        else:
            try:
                canonical, _ = gemini_request.to_canonical(body)
                translated, _ = messages_request.from_canonical(canonical, target.model)
            except Unmappable:  # what only Google can count (a cache, a hosted tool...)
                return None
            counted = {k: v for k, v in translated.items() if k in _COUNTED}

            def answer(payload: bytes) -> bytes:
                return _total_tokens(client.count_tokens_answer(payload))

        request = client.count_tokens_body(orjson.dumps({**counted, "model": target.model}))
        return path, request, answer
    if kind is Protocol.GEMINI and door is Protocol.GEMINI:
        url = client.platform.endpoint_url(client.protocol, client.base_url, target.model)
        path = url.replace(":generateContent", ":countTokens")  # a full URL, on any platform
        return path, wire_body(kind, body, target.model)[0], _as_is
    return None


def _as_is(payload: bytes) -> bytes:
    return payload


def _total_tokens(payload: bytes) -> bytes:
    """An anthropic count (``{"input_tokens"}``) as Gemini's ``{"totalTokens"}``."""
    counted = orjson.loads(payload)
    return orjson.dumps({"totalTokens": int(counted.get("input_tokens") or 0)})


async def count_tokens(
    runtime: Runtime,
    group: GroupSpec,
    body: dict[str, Any],
    headers: Mapping[str, str],
    door: Protocol = Protocol.MESSAGES,
) -> JsonReply | ErrorReply:
    """``headers``: the door's protocol headers (``anthropic-beta``…), filtered per provider
    like a call's. A target that fails otherwise, or times out, hands over to the next one."""
    trail: list[str] = []
    named = {"x-switchyard-request-id": uuid.uuid4().hex}
    for target in group.targets:
        provider = target.provider
        client = runtime.client_for(provider)
        how = None if provider.config_error else counter(door, target, client, body)
        if how is None:
            continue
        path, request, answer = how
        sent, _ = filter_betas(headers, provider.betas_allow, provider.betas_strip)
        try:
            response = await asyncio.wait_for(
                client.send(request, path=path, headers=sent),
                timeout=min(provider.timeouts.first_token_s, COUNT_CAP_S),
            )
            try:
                payload = await response.read_limited(COUNT_TOKENS_LIMIT)
            finally:
                await response.aclose()
        except TimeoutError:
            trail.append(f"{target.key}:TIMEOUT")
            continue  # the next target that counts
        except UpstreamFailure as exc:
            failure = exc.failure
            trail.append(f"{target.key}:{failure.code.value}:{failure.status}")
            if failure.code in ABOUT_THE_REQUEST and failure.status:
                return ErrorReply(
                    failure.status,
                    failure.message,
                    failure.code.value,
                    headers=_named(named, trail),
                    door=door,
                )
            continue  # the next target that counts
        trail.append(f"{target.key}:ok")
        return JsonReply(
            answer(payload),
            status=response.status_code,
            headers={"x-switchyard-target": target.key, **_named(named, trail)},
        )
    if trail:  # targets that count, and none did
        message = "no target could count the tokens: " + ", ".join(trail)
        return ErrorReply(
            502,
            message,
            "ROUTES_EXHAUSTED",
            "upstream_error",
            headers=_named(named, trail),
            door=door,
        )
    tokens = estimate_tokens(body)
    estimate = {"totalTokens": tokens} if door is Protocol.GEMINI else {"input_tokens": tokens}
    return JsonReply(
        orjson.dumps(estimate), headers={"x-switchyard-estimate": "true", **_named(named, trail)}
    )


def _named(named: dict[str, str], trail: list[str]) -> dict[str, str]:
    headers = {**named, "x-switchyard-attempts": str(len(trail))}
    if trail:
        headers["x-switchyard-trail"] = ",".join(trail)
    return headers


def estimate_tokens(body: dict[str, Any]) -> int:
    """A rough input-token count: ~4 characters a token over system, messages and tools
    (a Gemini request's system instruction, contents and tools)."""
    text = orjson.dumps(
        [
            body.get("system") or body.get("systemInstruction"),
            body.get("messages") or body.get("contents"),
            body.get("tools"),
        ]
    )
    return max(1, math.ceil(len(text) / 4))
