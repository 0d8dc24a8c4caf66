"""The first call at each door after a start costs what later calls cost (SPEC §20).

Measured before: a start's first Responses-door call spent 0.4 s in the gateway, importing
the URLconf (every view, and every API schema django-ninja builds with pydantic), compiling
the routing table from the database and loading a TLS context's CA bundle for the
provider's new pool. All of it is built at start now (``routing.api.asgi.
split_gateway_traffic``). Checked on the state of a fresh process — the modules a first call
imports, the table and clients it builds — never on time: a process starts the gateway as a
server does (importing ``router_project.asgi``), then calls each door, streamed and not,
against the simulator over a real socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from routing.simulator.server import FakeUpstream

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
providers:
  - {{name: chat, kind: openai, base_url: "{upstream}", api_key: k1}}
  - {{name: claude, kind: anthropic, base_url: "{upstream}", api_key: k2}}
  - {{name: resp, kind: openai-responses, base_url: "{upstream}", api_key: k3}}
  - {{name: gem, kind: gemini, base_url: "{root}", api_key: k4}}
groups:
  - name: g-chat
    targets: [{{provider: chat, model: c}}]
  - name: g-claude
    targets: [{{provider: claude, model: a}}]
  - name: g-resp
    targets: [{{provider: resp, model: r}}]
  - name: g-gem
    targets: [{{provider: gem, model: g}}]
"""

# Runs in a fresh process: set up a database, start the gateway as a server would, then
# call every door; prints what the calls had to build.
SCRIPT = r"""
import asyncio, json, sys

import django

django.setup()
from django.core.management import call_command

call_command("migrate", verbosity=0)
from routing.config.yaml import load_file
from routing.services.api_keys import generate_key
from routing.services.config_file import config_apply

config_apply(load_file(sys.argv[1]), source=sys.argv[1])
_, key = generate_key(name="first-call", kind="client")
import httpx  # the test's own client, and what httpx's ASGI transport imports when used
import sniffio  # noqa: F401

from router_project.asgi import application  # the start
from routing.gateway.runtime import get_runtime

runtime = get_runtime()
runtime.background_checks = False
table = runtime.table
clients = dict(runtime._clients)
ready = set(sys.modules)
CALLS = [
    ("/v1/chat/completions", {"model": "g-chat", "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"model": "g-claude", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/responses", {"model": "g-resp", "input": "hi"}),
]


async def main():
    transport = httpx.ASGITransport(app=application)
    headers = {"authorization": "Bearer " + key, "x-api-key": key}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        statuses = []
        for stream in (False, True):
            for path, body in CALLS:
                reply = await client.post(path, json={**body, "stream": stream}, headers=headers)
                statuses.append(reply.status_code)
            action = "streamGenerateContent?alt=sse" if stream else "generateContent"
            reply = await client.post(  # the Gemini door: the model and the stream in the URL
                "/v1beta/models/g-gem:" + action,
                json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                headers={"x-goog-api-key": key},
            )
            statuses.append(reply.status_code)
        return statuses


statuses = asyncio.run(main())
print(json.dumps({
    "statuses": statuses,
    "table_at_start": table is not None,
    "recompiled": runtime.table is not table,
    "clients_at_start": sorted(clients),
    "clients_built_by_calls": sorted(
        name for name, entry in runtime._clients.items() if clients.get(name) is not entry
    ),
    "imported_by_calls": sorted(set(sys.modules) - ready),
}))
"""


def test_a_start_builds_what_the_first_call_at_each_door_would(tmp_path: Path) -> None:
    with FakeUpstream() as upstream:
        config = tmp_path / "switchyard.yaml"
        root = upstream.base_url.removesuffix("/v1")
        config.write_text(CONFIG.format(upstream=upstream.base_url, root=root))
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
            "DJANGO_SETTINGS_MODULE": "router_project.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'first-call.sqlite3'}",
            "SWITCHYARD_VAR_DIR": str(tmp_path / "var"),
            "SWITCHYARD_SECRET_KEY": "first-call-secret-key-first-call-secret",
            "SWITCHYARD_HEALTH_CHECK_S": "0",
        }
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(config)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["statuses"] == [200] * 8
        assert len(upstream.requests) == 8  # every call reached the simulator
    assert seen["table_at_start"] and not seen["recompiled"]
    assert seen["clients_at_start"] == ["chat", "claude", "gem", "resp"]
    assert seen["clients_built_by_calls"] == []
    assert seen["imported_by_calls"] == []
