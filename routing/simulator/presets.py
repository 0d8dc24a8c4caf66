"""Ready-made upstreams for ``python -m routing.simulator`` and ``manage.py demo``.

The ``demo`` preset matches ``routing/simulator/demo.yaml`` (provider ``sim``):

- ``flaky-model``: 503 on 2 of every 3 requests (``Flaky(3)``), so the ``auto`` group,
  which retries in place twice, visibly retries and then succeeds;
- ``broken-model``: always 503, so the ``failover`` group visibly switches;
- ``steady-model``: always answers, 8 chunks 30 ms apart so streaming is visible;
- the same Claude on three platforms (the ``claude`` group, SPEC §19): ``claude-opus-4-8``
  on Anthropic's API is overloaded (529) and the same model on Amazon Bedrock
  (``DEMO_BEDROCK_MODEL``, SigV4 with the demo's AWS keys) answers; on Vertex AI
  (``DEMO_VERTEX_MODEL``, a token from the simulator's own token endpoint for the key file
  :func:`write_demo_google_account` writes) it answers too.

Any other model gets a 404 ``model_not_found``, as a real provider would answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from routing.simulator.script import Fail, Flaky, Reply
from routing.simulator.server import FakeUpstream

DEMO_API_KEY = "demo-upstream-key"
DEMO_MODELS = ["flaky-model", "broken-model", "steady-model"]
DEMO_CONFIG = Path(__file__).with_name("demo.yaml")
DEMO_CLAUDE = "claude-opus-4-8"  # on Anthropic's API: overloaded
DEMO_BEDROCK_MODEL = "us.anthropic.claude-opus-4-8-v1:0"
DEMO_VERTEX_MODEL = "claude-opus-4-8@20251101"
# Not secrets: the simulator checks SigV4 with them, as AWS would with real ones.
DEMO_AWS_KEY_ID = "AKIASWITCHYARDDEMO01"
DEMO_AWS_SECRET = "switchyard-demo-aws-secret-not-a-real-one"
DEMO_GOOGLE_ACCOUNT = "demo-google-account.json"  # in the gateway's var/ directory

_STREAMED = Reply(
    content="Hello from {model}! This answer arrives in eight small chunks, 30 ms apart.",
    chunks=8,
    chunk_delay_s=0.03,
)


def demo(host: str = "127.0.0.1", port: int = 9100) -> FakeUpstream:
    upstream = FakeUpstream(
        host,
        port,
        models=list(DEMO_MODELS),
        api_key=DEMO_API_KEY,
        default=Fail(404, "The model `{model}` does not exist.", code="model_not_found"),
        aws_keys={DEMO_AWS_KEY_ID: DEMO_AWS_SECRET},
    )
    overload = Fail(503, "{model} is overloaded (simulated)", code="server_overloaded")
    upstream.script("flaky-model", then=Flaky(3, fail=overload, ok=_STREAMED))
    upstream.script("broken-model", then=Fail(503, "{model} is down (simulated)"))
    upstream.script("steady-model", then=_STREAMED)
    upstream.script(DEMO_CLAUDE, then=Fail(529, "Overloaded (simulated)", code="overloaded_error"))
    upstream.script(DEMO_BEDROCK_MODEL, then=_STREAMED)
    upstream.script(DEMO_VERTEX_MODEL, then=_STREAMED)
    return upstream


def write_demo_google_account(directory: Path, token_uri: str) -> Path:
    """A service-account key file for the demo's Vertex AI provider, its ``token_uri`` the
    simulator's token endpoint (which trusts it once given ``--google-account``). A fresh
    key each time (mode 0600): it only ever opens the simulator."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    info = {
        "type": "service_account",
        "project_id": "switchyard-demo",
        "private_key_id": "demo",
        "private_key": pem.decode(),
        "client_email": "switchyard-demo@switchyard-demo.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / DEMO_GOOGLE_ACCOUNT
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(info, file)
    return path


def plain(host: str = "127.0.0.1", port: int = 9100) -> FakeUpstream:
    """Answers every model with the default ``Reply``; script it over ``/_control``."""
    return FakeUpstream(host, port)


PRESETS: dict[str, Callable[[str, int], FakeUpstream]] = {"demo": demo, "plain": plain}


def describe(upstream: FakeUpstream, preset: str) -> str:
    """The one line a foreground runner prints."""
    line = f"Switchyard simulator ({preset}) listening on {upstream.base_url}"
    if preset == "demo":
        line += (
            f" - models {', '.join(DEMO_MODELS)}; load {DEMO_CONFIG} with "
            f"SWITCHYARD_DEMO_PORT={upstream.port}; Ctrl-C stops"
        )
    return line
