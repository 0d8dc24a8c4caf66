"""What reaching Claude on Bedrock adds to a call's CPU over Anthropic's API: the work
``OpenAIClient.send`` does only for a Bedrock target — the body without ``model`` and
``stream`` and with ``anthropic_version`` (``prepare_body``), the beta header moved into
the body (``headers_into_body``) and the SigV4 signature (botocore, ``SigV4Signer``) —
per request, for Messages bodies of three sizes: ``python -m bench.bedrock_signing``
(a few seconds). A direct target does none of it, so this is the difference.

The rest of a send (the pool, the HTTP exchange) is the same for both. The signature
hashes the whole body (SigV4 signs its SHA-256), so its cost grows with the body.
"""

from __future__ import annotations

import asyncio
import time

import orjson
from botocore.credentials import Credentials

from routing.platforms.bedrock import BEDROCK, SigV4Signer
from routing.protocols import Protocol
from routing.protocols.registry import PROTOCOLS

URL = (
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
)
SIZES = (2_000, 20_000, 200_000)
CALLS, ROUNDS = 2_000, 5


def _body(size: int) -> bytes:
    messages = [{"role": "user", "content": "x" * size}]
    return orjson.dumps(
        {"model": "claude", "stream": True, "max_tokens": 1024, "messages": messages}
    )


async def _per_call(body: bytes) -> float:
    """CPU seconds of the Bedrock-only work of one send (best of ``ROUNDS``)."""
    messages = PROTOCOLS[Protocol.MESSAGES]
    signer = SigV4Signer("bench", "us-east-1", Credentials("AKIABENCH", "secret", None))
    headers = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
    sent = {"content-type": "application/json"}
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for _ in range(CALLS):
            prepared = BEDROCK.prepare_body(messages, body, "m", True)
            prepared, _rest = BEDROCK.headers_into_body(messages, prepared, headers)
            await signer.headers("POST", URL, prepared, sent)
        best = min(best, (time.process_time() - started) / CALLS)
    return best


def main() -> None:
    print("| Messages body | added CPU per call (µs, best of 5 × 2 000) |")
    print("| ---: | ---: |")
    for size in SIZES:
        seconds = asyncio.run(_per_call(_body(size)))
        print(f"| {size // 1000} kB | {seconds * 1e6:.0f} |")


if __name__ == "__main__":
    main()
