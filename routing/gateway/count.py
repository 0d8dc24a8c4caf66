"""Counting a request's input tokens (``POST /v1/messages/count_tokens``, SPEC §15): the
group's first target whose protocol has a count endpoint (``ProtocolSpec.count_tokens``)
and answers gives its own count, with its status; else an estimate. Not a call: nothing is
generated, so nothing is charged, retried or recorded.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import orjson

from routing.gateway.replies import JsonReply
from routing.gateway.runtime import Runtime
from routing.gateway.table import GroupSpec
from routing.protocols.betas import filter_betas
from routing.upstream.base import UpstreamFailure

COUNT_TOKENS_LIMIT = 1 << 20  # an upstream count is a small JSON object


async def count_tokens(
    runtime: Runtime, group: GroupSpec, body: dict[str, Any], headers: Mapping[str, str]
) -> JsonReply:
    """``headers``: the door's protocol headers (``anthropic-beta``…), filtered per provider
    like a call's. A target that fails or times out hands over to the next one."""
    for target in group.targets:
        provider = target.provider
        if not provider.protocol.count_tokens or provider.config_error:
            continue
        client = runtime.client_for(provider)
        path = client.url.removeprefix(client.base_url) + "/count_tokens"
        sent, _ = filter_betas(headers, provider.betas_allow, provider.betas_strip)
        try:
            response = await asyncio.wait_for(
                client.send(orjson.dumps({**body, "model": target.model}), path=path, headers=sent),
                timeout=provider.timeouts.first_token_s,
            )
            try:
                payload = await response.read_limited(COUNT_TOKENS_LIMIT)
            finally:
                await response.aclose()
        except (UpstreamFailure, TimeoutError):
            continue  # the next target that counts, else the estimate
        return JsonReply(payload, status=response.status_code)
    estimate = {"input_tokens": estimate_tokens(body)}
    return JsonReply(orjson.dumps(estimate), headers={"x-switchyard-estimate": "true"})


def estimate_tokens(body: dict[str, Any]) -> int:
    """A rough input-token count: ~4 characters a token over system, messages and tools."""
    text = orjson.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    return max(1, math.ceil(len(text) / 4))
