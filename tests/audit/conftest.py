"""Audit fixtures: the live gateway (``harness``) with the process audit writer attached to
its hub, empty audit tables, and an admin key for the management API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Harness, settle_calls

MESSAGES = [{"role": "user", "content": "hi"}]

# p1/a retries in place at most twice; one failure opens its circuit (the default).
RETRY_TWICE = """
providers:
  - name: p1
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p1-0123456789
  - name: p2
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-p2-0123456789
groups:
  - name: auto
    retry: {max_retries: 2}
    targets:
      - {provider: p1, model: a}
      - {provider: p2, model: b}
  - name: other
    targets:
      - {provider: p2, model: b}
"""


def clear_audit_tables() -> None:
    from routing.audit.models import Attempt, Call, ConfigChange, Fallback, HealthTransition

    Attempt.objects.all().delete()
    for model in (Call, Fallback, HealthTransition, ConfigChange):
        model.objects.all().delete()


@dataclass
class Audit:
    """The harness plus an authenticated management API client."""

    h: Harness
    api: httpx.Client

    def flush(self) -> None:
        """Every call begun so far finished and its records written (a stream's record
        is published just after its client read the last byte)."""
        from routing.gateway.runtime import get_runtime

        assert settle_calls(get_runtime()), "the audit writer did not settle in time"


@pytest.fixture
def audit(harness: Harness) -> Iterator[Audit]:
    from routing.audit import writer
    from routing.services.api_keys import generate_key

    writer.flush(10)  # records of earlier tests must not land in this one
    clear_audit_tables()
    writer.attach(harness.runtime.hub)  # type: ignore[attr-defined]
    harness.runtime.rand = lambda: 0.5  # type: ignore[attr-defined]
    _, admin_key = generate_key(name="ops", kind="admin")
    with httpx.Client(
        base_url=harness.gateway.url, headers={"authorization": f"Bearer {admin_key}"}, timeout=10
    ) as api:
        yield Audit(h=harness, api=api)
    writer.flush(10)
