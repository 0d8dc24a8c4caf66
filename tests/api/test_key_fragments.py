"""SPEC §9 / issue 10 item 3: upstreams echo keys *masked* (``sk-proj-ab12****9f3e``). No
6-character fragment of any provider's secret — its credential or a header value (issue 37
item 14) — may reach a reply, an exhaustion message, a
stored attempt/fallback/health record, an event, an API read, a provider test result, a
log line or a metric. Real sockets: the openai-shaped upstream echoes the presented key."""

from __future__ import annotations

import logging

import httpx
import pytest

from routing.audit import writer
from routing.simulator.script import KeyEcho
from tests.api.conftest import API, database_dump
from tests.api.test_credential_scan import _seen
from tests.conftest import Harness, off_loop

K1 = "sk-proj-ab12cd34ef56gh78ij90kl9f3e"
K2 = "sk-proj-zz98yx76wv54ut32sr10qp7a1b"
H1 = "hv-mn45op67qr89st01uv23wx4yz"  # a credential in a header of the provider's own

CONFIG = f"""
providers:
  - name: p1
    kind: openai
    base_url: {{upstream}}
    api_key: {K1}
    models: [a]
  - name: p2
    kind: openai
    base_url: {{upstream}}
    api_key: {K2}
    headers: {{x-org-token: {H1}}}
    models: [b]
groups:
  - name: auto
    targets:
      - {{provider: p1, model: a}}
      - {{provider: p2, model: b}}
"""


def fragments(secret: str, n: int = 6) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def leaked(text: str) -> set[str]:
    return {f for secret in (K1, K2, H1) for f in fragments(secret) if f in text}


def test_no_fragment_of_any_secret_survives_a_masked_echo(
    live: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    from routing.services.api_keys import generate_key

    caplog.set_level(logging.DEBUG)
    writer.attach(live.runtime.hub)  # type: ignore[attr-defined]
    live.configure(CONFIG)
    live.upstream.script("a", then=KeyEcho())
    live.upstream.script("b", then=KeyEcho(403, header="x-org-token"))  # echoes H1, masked
    _, admin = generate_key(name="ops", kind="admin")
    seen: list[str] = []
    with (
        httpx.Client(
            base_url=live.gateway.url + API,
            headers={"authorization": f"Bearer {admin}"},
            timeout=10,
        ) as api,
        httpx.Client(
            base_url=live.gateway.base_url,
            headers={"authorization": f"Bearer {live.key}"},
            timeout=10,
        ) as v1,
    ):
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
        failed = v1.post("/chat/completions", json=body)
        seen.append(_seen(failed))
        assert failed.status_code == 502
        assert "Incorrect API key provided: [redacted]" in failed.text  # the echo was there
        again = v1.post("/chat/completions", json=body)  # both disabled now: 503 quoting them
        seen.append(_seen(again))
        assert again.status_code == 503
        for provider in ("p1", "p2"):
            tested = api.post(f"/providers/{provider}/test")
            seen.append(_seen(tested))
            assert tested.json()["ok"] is False and "[redacted]" in tested.json()["message"]
        assert off_loop(lambda: writer.flush(10))
        for path in ("/status", "/calls", "/events", "/providers", "/providers/p1"):
            response = api.get(path)
            assert response.status_code == 200, path
            seen.append(_seen(response))
        metrics = api.get(live.gateway.url + "/metrics")
        seen.append(_seen(metrics))
    events = "\n".join(repr(e) for e in live.runtime.hub.recent)  # type: ignore[attr-defined]
    assert "Incorrect API key provided" in events
    texts = {
        "responses": "\n".join(seen),
        "events": events,
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records),
        "database": off_loop(database_dump),
    }
    assert "Incorrect API key provided" in texts["database"]
    for where, text in texts.items():
        assert not leaked(text), f"a fragment of a secret leaked into {where}: {leaked(text)}"


def test_the_redactor_removes_runs_of_six_and_keeps_ordinary_text() -> None:
    from routing.engine.failures import Redactor

    redact = Redactor([K1, "short"])
    assert redact(f"bad key {K1[:12]}****{K1[-4:]} sent") == "bad key [redacted]****9f3e sent"
    assert redact(f"x{K1}y") == "x[redacted]y"
    assert redact("stream ended before a finish reason") == "stream ended before a finish reason"
    assert redact("a short word") == "a [redacted] word"
    assert Redactor()("anything") == "anything"
