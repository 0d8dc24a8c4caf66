"""A configuration the gateway cannot read must not turn ``/v1`` into Django's HTML 500
(issue 11 §4): a credential the secret key cannot decrypt is that provider's configuration
failure, and a process with no table at all answers an OpenAI-shaped 503.

Over real sockets: the official SDK or httpx -> the live gateway -> the loopback upstream.
The same over separate processes (a daphne started with another secret key, or on an
unmigrated database) is in ``tests/test_config_processes.py``."""

from __future__ import annotations

from typing import Any

from routing.events import CallRecord
from tests.conftest import TWO_ROUTES, Harness, off_loop

MESSAGES = [{"role": "user", "content": "hi"}]


def test_a_credential_the_secret_cannot_decrypt_fails_over_as_a_configuration_failure(
    harness: Harness, settings: Any
) -> None:
    from routing.models import Provider

    harness.configure(TWO_ROUTES)  # both credentials encrypted under the first secret
    settings.SWITCHYARD = {**settings.SWITCHYARD, "SECRET_KEY": "another-secret"}

    def set_p2_again() -> None:  # the operator set p2's credential again; p1's is unreadable
        row = Provider.objects.get(name="p2")
        row.set_api_key("upstream-key-p2")
        row.save()

    off_loop(set_p2_again)
    harness.runtime.invalidate()  # type: ignore[attr-defined]
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.model == "b"
    assert harness.upstream.count("a") == 0
    [call] = harness.events(CallRecord, at_least=1)
    assert call.outcome == "ok"
    assert call.attempts[0].code == "MISSING_CREDENTIAL"
    assert "cannot be decrypted with SWITCHYARD_SECRET_KEY" in call.attempts[0].message
    assert harness.upstream.requests[-1].headers["authorization"] == "Bearer upstream-key-p2"
