"""Counting a request's input tokens (``POST /v1/messages/count_tokens``, SPEC §15): the
group's first target whose protocol has a count endpoint (``ProtocolSpec.count_tokens``)
and answers gives its own count, with its status; its 4xx about the request is the door's
own (never a 200 estimate); the estimate only when no target of the group can count, and a
502 when every one that can failed. Every answer names itself as a call's does
(``x-switchyard-request-id``, ``-attempts``, ``-trail``, ``-target``). Not a call: nothing
is generated, so nothing is charged, retried or recorded.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from routing.engine.failures import FailureCode
from routing.gateway.replies import ErrorReply, JsonReply
from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec
from routing.protocols import Protocol
from routing.protocols.betas import filter_betas
from routing.upstream.base import UpstreamFailure

COUNT_TOKENS_LIMIT = 1 << 20  # an upstream count is a small JSON object
# An upstream's answer about the request itself: the client's to fix, whichever target.
# A count is no generation: its answer comes at once, whatever first_token_s allows a
# thinking model (docs/outages.md).
COUNT_CAP_S = 60.0
ABOUT_THE_REQUEST = (FailureCode.BAD_REQUEST, FailureCode.CONTEXT_WINDOW_EXCEEDED)


async def count_tokens(
    runtime: Runtime, group: GroupSpec, body: dict[str, Any], headers: Mapping[str, str]
) -> JsonReply | ErrorReply:
    """``headers``: the door's protocol headers (``anthropic-beta``…), filtered per provider
    like a call's. A target that fails otherwise, or times out, hands over to the next one."""
    trail: list[str] = []
    named = {"x-switchyard-request-id": uuid.uuid4().hex}
    for target in group.targets:
        provider = target.provider
        if not provider.protocol.count_tokens or provider.config_error:
            continue
        client = runtime.client_for(provider)
        path = client.count_tokens_url(target.model)
        if path is None:
            continue  # reached on a platform that cannot count
        sent, _ = filter_betas(headers, provider.betas_allow, provider.betas_strip)
        try:
            response = await asyncio.wait_for(
                client.send(
                    client.count_tokens_body(orjson.dumps({**body, "model": target.model})),
                    path=path,
                    headers=sent,
                ),
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
                    door=Protocol.MESSAGES,
                )
            continue  # the next target that counts
        trail.append(f"{target.key}:ok")
        return JsonReply(
            client.count_tokens_answer(payload),
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
            door=Protocol.MESSAGES,
        )
    estimate = {"input_tokens": estimate_tokens(body)}
    return JsonReply(
        orjson.dumps(estimate), headers={"x-switchyard-estimate": "true", **_named(named, trail)}
    )


def _named(named: dict[str, str], trail: list[str]) -> dict[str, str]:
    headers = {**named, "x-switchyard-attempts": str(len(trail))}
    if trail:
        headers["x-switchyard-trail"] = ",".join(trail)
    return headers


def estimate_tokens(body: dict[str, Any]) -> int:
    """A rough input-token count: ~4 characters a token over system, messages and tools."""
    text = orjson.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    return max(1, math.ceil(len(text) / 4))
