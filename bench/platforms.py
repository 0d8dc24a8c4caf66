"""What a cloud platform adds to a call's CPU over the direct path (SPEC §19), measured in
the same run: ``python -m bench.platforms`` (about 1 min).

What a platform changes on the request path is what ``OpenAIClient.send`` does before it
posts: the URL (a Bedrock URL names the model), the body (Bedrock's Anthropic body drops
``model``/``stream`` and gains ``anthropic_version``) and the credential (a SigV4
signature computed per request by botocore). The rest of a call — the door, the routing,
the relay — is the same code whatever the platform, so this replays exactly those steps
for one Messages request, per platform, in alternating rounds with the direct path's, and
reports the CPU per call of each and the difference. Interleaving and the median of the
paired differences keep the shared machine's drifting speed out of the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import orjson

from routing.platforms.base import PlatformSettings, PlatformSpec
from routing.protocols import Protocol
from routing.protocols.registry import PLATFORMS, PROTOCOLS

MESSAGES = PROTOCOLS[Protocol.MESSAGES]
MODEL = "claude-sonnet-4-5"


def messages_body(repeat: int = 200) -> bytes:
    """A Claude Code-like Messages request (``repeat``: how long its user turn is)."""
    return orjson.dumps(
        {
            "model": MODEL,
            "max_tokens": 1024,
            "stream": True,
            "system": "You are a coding agent." * 20,
            "messages": [{"role": "user", "content": "Refactor this function. " * repeat}],
        }
    )


BODY = messages_body()
HEADERS = {"content-type": "application/json", "accept": "application/json"}
BETAS = {"anthropic-beta": "interleaved-thinking-2025-05-14"}  # Claude Code sends betas
# What each platform is measured with: explicit keys (no credential-chain lookup: that
# happens once per client, not per call) and a base URL that is never contacted.
SETTINGS = {
    "bedrock": PlatformSettings(
        region="us-east-1",
        aws_access_key_id="AKIDEXAMPLEBENCH0000",
        aws_secret_access_key="bench-secret-access-key-0000000000000000",
    ),
}
BASES = {"direct": "https://api.anthropic.com", "bedrock": ""}


def prepare(platform: PlatformSpec, request: bytes = BODY) -> Callable[[], Awaitable[object]]:
    """One request's platform work, as ``OpenAIClient.send`` does it."""
    settings = SETTINGS.get(platform.name, PlatformSettings())
    base = BASES.get(platform.name) or platform.default_base_url(MESSAGES, settings)
    auth = platform.authenticator("bench", MESSAGES, "", settings, time.time)
    per_request_url = platform.model_in_url or MESSAGES.model_path is not None
    fixed_url = platform.endpoint_url(MESSAGES, base)

    async def send() -> object:
        url = platform.endpoint_url(MESSAGES, base, MODEL, True) if per_request_url else fixed_url
        body = request
        headers: dict[str, str] = {}
        if platform.name != "direct":
            body = platform.prepare_body(MESSAGES, body, MODEL, True)
            body, _ = platform.headers_into_body(MESSAGES, body, BETAS)
            if auth is not None:
                headers = dict(await auth.headers("POST", url, body, HEADERS))
        return url, body, headers

    return send


async def per_call_cpu(send: Callable[[], Awaitable[object]], calls: int) -> float:
    """CPU seconds per call over ``calls`` calls (this thread's)."""
    started = time.thread_time()
    for _ in range(calls):
        await send()
    return (time.thread_time() - started) / calls


async def measure(
    names: list[str], calls: int, rounds: int, request: bytes = BODY
) -> dict[str, dict[str, float]]:
    direct = prepare(PLATFORMS["direct"], request)
    others = {name: prepare(PLATFORMS[name], request) for name in names}
    for send in (direct, *others.values()):
        await per_call_cpu(send, calls // 10)  # warm: imports, caches
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, send in others.items():
            base = await per_call_cpu(direct, calls)
            runs[name].append((base, await per_call_cpu(send, calls)))
    return {
        name: {
            "direct_us": statistics.median(b for b, _ in pairs) * 1e6,
            "platform_us": statistics.median(p for _, p in pairs) * 1e6,
            "added_us": statistics.median(p - b for b, p in pairs) * 1e6,
        }
        for name, pairs in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--repeat", type=int, default=200, help="the user turn's length (200: a 5 kB body)"
    )
    args = parser.parse_args()
    names = [name for name in PLATFORMS if name != "direct" and name in SETTINGS]
    request = messages_body(args.repeat)
    print(f"a {len(request) / 1000:.0f} kB Messages request")
    figures = asyncio.run(measure(names, args.calls, args.rounds, request))
    print(f"{'platform':<10} {'direct µs':>10} {'platform µs':>12} {'added µs':>9}  (CPU per call)")
    for name, row in figures.items():
        print(
            f"{name:<10} {row['direct_us']:>10.1f} {row['platform_us']:>12.1f}"
            f" {row['added_us']:>9.1f}"
        )


if __name__ == "__main__":
    main()
