"""A client is told which provider failed and how (its failure code), never the gateway's
internal addresses: "Connect call failed ('127.0.0.1', 1)" stays in the operator's log and
the ledger (SPEC §9), out of the 502's body, its ``x-switchyard-*`` headers and a stream's
error event."""

from __future__ import annotations

import logging

import httpx
import pytest

from routing.audit.models import Attempt
from tests.audit.conftest import Audit
from tests.state.servers import free_port

MESSAGES = [{"role": "user", "content": "hi"}]
CLOSED = free_port()  # nothing listens there: every connection is refused
DEAD_ENDS = f"""
providers:
  - name: p1
    kind: openai
    base_url: http://127.0.0.1:{CLOSED}/v1
    api_key: upstream-key-p1
    models: [a]
  - name: p2
    kind: anthropic
    base_url: http://127.0.0.1:{CLOSED}
    api_key: upstream-key-p2
groups:
  - name: auto
    retry: {{max_retries: 0}}
    targets:
      - {{provider: p1, model: a}}
      - {{provider: p2, model: b}}
  - name: surfaced
    switch_codes: [SERVER]
    retry: {{max_retries: 0}}
    targets:
      - {{provider: p1, model: a}}
"""
ADDRESS = f"127.0.0.1', {CLOSED}"


def _leaks(text: str) -> bool:
    return ADDRESS in text or "Connect call" in text or "127.0.0.1" in text


@pytest.mark.parametrize("path", ["/chat/completions", "/messages", "/responses"])
@pytest.mark.parametrize("model", ["auto", "surfaced"])
def test_a_refused_connection_names_the_provider_not_the_address(
    audit: Audit, caplog: pytest.LogCaptureFixture, path: str, model: str
) -> None:
    audit.h.configure(DEAD_ENDS)
    caplog.set_level(logging.INFO, logger="switchyard")
    body: dict[str, object] = {"model": model, "max_tokens": 5}
    body["input" if path == "/responses" else "messages"] = (
        "hi" if path == "/responses" else MESSAGES
    )
    reply = httpx.post(
        audit.h.gateway.base_url + path,
        json=body,
        headers={"authorization": f"Bearer {audit.h.key}"},
        timeout=30,
    )
    assert reply.status_code == 502, reply.text
    assert "TRANSPORT" in reply.text and "p1" in reply.text
    assert not _leaks(reply.text), reply.text
    for name, value in reply.headers.items():
        assert not _leaks(value), (name, value)
    # The operator keeps the detail: the log and the ledger.
    assert any(ADDRESS in r.getMessage() for r in caplog.records if r.name.startswith("switchyard"))
    audit.flush()
    messages = list(Attempt.objects.values_list("message", flat=True))
    assert messages and all(ADDRESS in m for m in messages), messages


def test_a_stream_that_cannot_connect_says_so_without_the_address(audit: Audit) -> None:
    audit.h.configure(DEAD_ENDS)
    with httpx.stream(
        "POST",
        audit.h.gateway.base_url + "/chat/completions",
        json={"model": "surfaced", "messages": MESSAGES, "stream": True},
        headers={"authorization": f"Bearer {audit.h.key}"},
        timeout=30,
    ) as reply:
        text = reply.read().decode()
    assert reply.status_code == 502 and "TRANSPORT" in text
    assert not _leaks(text), text
