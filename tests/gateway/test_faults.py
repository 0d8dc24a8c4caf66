"""Issue 10: promises that hold under real faults. The official openai SDK → Switchyard
(real sockets) → the scripted loopback upstream (real sockets); time that must pass is a
fake clock the runtime reads, never a sleep."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import Fail, Reply, Silent
from tests.conftest import TWO_ROUTES, Harness, off_loop

MESSAGES = [{"role": "user", "content": "hi"}]


@dataclass
class FakeClock:
    now: float

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(harness: Harness) -> FakeClock:
    fake = FakeClock(time.time())
    harness.runtime.clock = fake  # type: ignore[attr-defined]
    yield fake
    harness.runtime.clock = time.time  # type: ignore[attr-defined]


@pytest.fixture
def checks_every_10_s(settings: Any) -> None:
    """The gateway-wide default interval of active checks, which these tests count on, set
    here rather than taken from the process: tests/conftest.py turns checks off in the
    environment for the gateways tests start, and whether this process's settings were read
    before that (plain pytest) or after (an xdist worker inherits it) is not theirs to know."""
    settings.SWITCHYARD = {**settings.SWITCHYARD, "HEALTH_CHECK_S": 10.0}


def no_retries(config: str) -> str:
    return config.replace("  - name: auto\n", "  - name: auto\n    retry: {max_retries: 0}\n")


def sdk(h: Harness, **kwargs: object) -> openai.OpenAI:
    """The official client with its defaults (``max_retries=2``) unless told otherwise."""
    return openai.OpenAI(base_url=h.gateway.base_url, api_key=h.key, **kwargs)  # type: ignore[arg-type]


# -- item 2: first-token timeout for non-streaming calls ------------------------------------
def test_a_silent_upstream_times_out_a_json_call_at_first_token_s(harness: Harness) -> None:
    harness.configure(
        TWO_ROUTES.replace(
            "api_key: upstream-key-p1",
            "api_key: upstream-key-p1\n    timeouts: {first_token_s: 0.5, total_s: 20}",
        )
    )
    harness.upstream.script("a", then=Silent())
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    [call] = harness.events(CallRecord, at_least=1)
    assert call.attempts[0].code == "TIMEOUT"
    assert call.attempts[0].message == "first-token timeout: no response headers"
    assert harness.upstream.count("a") == 1  # TIMEOUT is not retried in place


# -- item 4: no retry storms ----------------------------------------------------------------
def test_the_sdk_with_its_default_retries_replays_the_chain_only_once(harness: Harness) -> None:
    harness.configure(TWO_ROUTES)
    harness.upstream.script("a", then=Fail(503, "a is down"))
    harness.upstream.script("b", then=Fail(500, "b is down"))
    client = sdk(harness)
    assert client.max_retries == 2  # the SDK default: it would retry a 502 twice
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert caught.value.response.headers["x-should-retry"] == "false"
    # both targets are cooling now (10 s base): the earliest revival
    assert caught.value.response.headers["retry-after"] == "10"
    # one chain, exactly once: a until switch_after_ms, b (the last) its 5 retries
    assert harness.upstream.count("a") == 3 and harness.upstream.count("b") == 6


def test_rate_limited_everywhere_says_when_and_is_never_force_revived_early(
    harness: Harness, clock: FakeClock
) -> None:
    harness.configure(TWO_ROUTES)
    harness.upstream.script("a", then=Fail(429, "slow down", headers={"Retry-After": "30"}))
    harness.upstream.script("b", then=Fail(429, "slow down", headers={"Retry-After": "60"}))
    client = sdk(harness)
    with pytest.raises(openai.APIStatusError) as first:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert first.value.status_code == 502
    assert first.value.response.headers["x-should-retry"] == "false"
    assert first.value.response.headers["retry-after"] == "30"
    clock.advance(10)
    with pytest.raises(openai.APIStatusError) as second:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert second.value.status_code == 503  # nothing tried: nobody is revived before 30 s
    assert second.value.response.headers["x-should-retry"] == "false"
    assert second.value.response.headers["retry-after"] == "20"
    assert harness.upstream.count("a") == 1 and harness.upstream.count("b") == 1
    clock.advance(21)
    harness.upstream.script("a", Reply())
    assert (
        client.chat.completions.create(model="auto", messages=MESSAGES).choices[0].message.content
        == "Hello from a."
    )


# -- item 5: recovery within 15 s -----------------------------------------------------------
def check_pass(h: Harness) -> list[str]:
    from routing.gateway.checker import check_once

    future = asyncio.run_coroutine_threadsafe(
        check_once(h.runtime.health_checks()),  # type: ignore[attr-defined]
        h.gateway.loop,
    )
    return future.result(timeout=30)


def test_a_target_serves_within_15_s_of_recovering_from_a_long_outage(
    harness: Harness, clock: FakeClock, checks_every_10_s: None
) -> None:
    harness.configure(no_retries(TWO_ROUTES))
    harness.upstream.script("a", then=Fail(503, "outage"))
    client = harness.client()
    started = clock.now
    recovered_at: float | None = None
    served_again: float | None = None
    client_tries_into_a = 0
    checks = 0
    while served_again is None and clock.now - started < 900:
        raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
        trail = raw.headers["x-switchyard-trail"]
        if recovered_at is None:
            client_tries_into_a += trail.count("p1/a:")
        if raw.headers["x-switchyard-target"] == "p1/a":
            served_again = clock.now
            break
        checks += len(check_pass(harness))
        clock.advance(1)
        # Recover 5 minutes in, just after a client probe failed (its next window is 320 s).
        if recovered_at is None and clock.now - started >= 312:
            harness.upstream.script("a", then=Reply())
            recovered_at = clock.now
    assert recovered_at is not None and served_again is not None
    recovery_s = served_again - recovered_at
    print(f"recovery after a {recovered_at - started:.0f} s outage: {recovery_s:.0f} s")
    assert recovery_s <= 15
    # The outage cost clients one try per cooling window (10, 20, 40, 80, 160 s: windows
    # opened at 0, 10, 30, 70, 150 and 310 s), the active checks carried the rest.
    assert client_tries_into_a == 6
    assert 25 <= checks <= 40  # about one ping per 10 s, off the client's path


def test_failed_client_probes_do_not_push_the_active_checks_back(
    harness: Harness, clock: FakeClock, checks_every_10_s: None
) -> None:
    # Issue 24 item 7: each failed client probe (one per doubled window) re-armed the
    # checks a whole interval later, so the checker saw a recovery late and client calls
    # came back later still. The checks keep their 10 s cadence whatever clients do.
    harness.configure(no_retries(TWO_ROUTES))
    harness.upstream.script("a", then=Fail(503, "outage"))
    client = harness.client()
    started = clock.now
    checked_at: list[float] = []
    client_tries_into_a = 0
    while clock.now - started < 100:
        raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
        client_tries_into_a += raw.headers["x-switchyard-trail"].count("p1/a:")
        if check_pass(harness):
            checked_at.append(clock.now - started)
        clock.advance(1)
    assert client_tries_into_a == 4  # windows opened at 0, 10, 30 and 70 s
    assert checked_at == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    # and a recovery one tick after a failed client probe is served within an interval
    harness.upstream.script("a", then=Reply())
    recovered_at = clock.now
    while clock.now - recovered_at <= 15:
        raw = client.chat.completions.with_raw_response.create(model="auto", messages=MESSAGES)
        if raw.headers["x-switchyard-target"] == "p1/a":
            break
        check_pass(harness)
        clock.advance(1)
    assert clock.now - recovered_at <= 10


def test_a_full_outage_says_to_come_back_at_the_next_active_check(
    harness: Harness, clock: FakeClock, checks_every_10_s: None
) -> None:
    # A client that honours Retry-After (Codex does) comes back when a recovered route
    # can be serving again: the next active check, not a doubled cooling window later.
    harness.configure(no_retries(TWO_ROUTES))
    harness.upstream.script("a", then=Fail(503, "outage"))
    harness.upstream.script("b", then=Fail(503, "outage"))
    client = harness.client()
    with pytest.raises(openai.APIStatusError):  # both cool for 10 s
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert check_pass(harness) == []  # arms the checks: due at +10 s
    clock.advance(10)
    assert sorted(check_pass(harness)) == ["p1/a", "p2/b"]  # they fail: next at +20 s
    with pytest.raises(openai.APIStatusError):  # the client's probes fail: cool till +30 s
        client.chat.completions.create(model="auto", messages=MESSAGES)
    clock.advance(1)
    with pytest.raises(openai.APIStatusError):  # this window's one force-revive (of a)
        client.chat.completions.create(model="auto", messages=MESSAGES)
    with pytest.raises(openai.APIStatusError) as shed:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert shed.value.status_code == 503
    assert "p2/b → cooling for 19 s" in shed.value.message
    assert shed.value.response.headers["retry-after"] == "9"  # the next check, not 19 s


@pytest.mark.parametrize("status", [429, 503])
def test_no_active_check_pings_a_target_before_its_providers_retry_after(
    harness: Harness, clock: FakeClock, checks_every_10_s: None, status: int
) -> None:
    # A successful early ping would revive the target for client calls too (SPEC §4).
    harness.configure(no_retries(TWO_ROUTES))
    harness.upstream.script("a", Fail(status, "come back later", headers={"Retry-After": "30"}))
    harness.upstream.script("b", then=Reply())
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    harness.upstream.script("a", then=Reply())  # recovered early, but it asked for 30 s
    assert check_pass(harness) == []  # the first sighting arms the check
    for _ in range(2):
        clock.advance(10)
        assert check_pass(harness) == []
    assert harness.upstream.count("a") == 1
    clock.advance(10)
    assert check_pass(harness) == ["p1/a"]
    assert harness.upstream.count("a") == 2
    raw = harness.client().chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES
    )
    assert raw.headers["x-switchyard-target"] == "p1/a"


def test_each_provider_checks_at_its_own_interval(harness: Harness, clock: FakeClock) -> None:
    # SPEC §4: "cheap and configurable per provider"; 0 turns a provider's checks off.
    harness.configure(
        no_retries(TWO_ROUTES)
        .replace("api_key: upstream-key-p1", "api_key: upstream-key-p1\n    health_check_s: 30")
        .replace("api_key: upstream-key-p2", "api_key: upstream-key-p2\n    health_check_s: 0")
    )
    harness.upstream.script("a", then=Fail(503, "down"))
    harness.upstream.script("b", then=Fail(503, "down"))
    with pytest.raises(openai.APIStatusError):
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert check_pass(harness) == []  # arms p1/a; p2/b is never checked
    seen: list[tuple[int, list[str]]] = []
    for second in range(10, 70, 10):
        clock.advance(10)
        seen.append((second, check_pass(harness)))
    assert seen == [
        (10, []),
        (20, []),
        (30, ["p1/a"]),
        (40, []),
        (50, []),
        (60, ["p1/a"]),
    ]
    assert harness.upstream.count("b") == 1  # the client's call only


def test_a_provider_no_request_can_reach_is_not_checked_and_others_still_are(
    harness: Harness, clock: FakeClock, checks_every_10_s: None
) -> None:
    from routing.models import Provider

    harness.configure(no_retries(TWO_ROUTES))
    harness.upstream.script("a", then=Fail(503, "down"))
    harness.upstream.script("b", Fail(503, "down"), then=Reply())
    with pytest.raises(openai.APIStatusError):
        harness.client().chat.completions.create(model="auto", messages=MESSAGES)

    def poison() -> None:  # a credential stored before validation refused such values
        row = Provider.objects.get(name="p1")
        row.set_api_key("sk-clé-ünicode")
        row.save()

    off_loop(poison)
    off_loop(harness.runtime.reload)  # type: ignore[attr-defined]
    assert check_pass(harness) == []  # arms the check of p2/b
    clock.advance(10)
    assert check_pass(harness) == ["p2/b"]  # the pass is not aborted by p1's credential
    assert harness.upstream.count("a") == 1 and harness.upstream.count("b") == 2
    raw = harness.client().chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES
    )
    assert raw.headers["x-switchyard-target"] == "p2/b"


# -- item 6: credential scope and bounded names ---------------------------------------------
SAME_PROVIDER = """
providers:
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: k1, models: [a, c]}
  - {name: p2, kind: openai, base_url: "{upstream}", api_key: k2, models: [b]}
groups:
  - name: auto
    targets:
      - {provider: p1, model: a}
      - {provider: p1, model: c}
      - {provider: p2, model: b}
"""


def test_a_retry_after_date_is_read_on_the_runtimes_clock(
    harness: Harness, clock: FakeClock
) -> None:
    """An HTTP-date ``Retry-After`` is dated by the runtime's clock, the one every other
    deadline uses, not by the machine's."""
    from email.utils import formatdate

    clock.advance(86_400 * 365)  # the runtime's clock is a year ahead of the machine's
    harness.configure(  # a 4 s wait in place, within the switch budget
        TWO_ROUTES.replace(
            "  - name: auto\n", "  - name: auto\n    retry: {switch_after_ms: 6000}\n"
        )
    )
    when = formatdate(clock.now + 4, usegmt=True)
    harness.upstream.script("a", Fail(429, headers={"Retry-After": when}), then=Reply())
    reply = harness.client().chat.completions.with_raw_response.create(
        model="auto", messages=MESSAGES
    )
    assert reply.headers["x-switchyard-target"] == "p1/a"  # waited in place, no switch
    [delay] = harness.sleeps.delays
    assert 2 <= delay <= 5  # about four seconds on that clock (the date has 1 s precision)


def test_a_bug_in_the_gateway_is_a_500_in_the_doors_shape_and_on_the_record(
    harness: Harness,
) -> None:
    from routing.state.memory import MemoryStore

    class BrokenStore(MemoryStore):
        async def snapshot(self, keys, providers):  # type: ignore[no-untyped-def]
            raise RuntimeError("a bug in the store")

    harness.configure(TWO_ROUTES)
    harness.runtime.use_store(BrokenStore())  # type: ignore[attr-defined]
    auth = {"authorization": f"Bearer {harness.key}"}
    chat = httpx.post(
        harness.gateway.base_url + "/chat/completions",
        headers=auth,
        json={"model": "auto", "messages": MESSAGES},
        timeout=30,
    )
    assert chat.status_code == 500 and chat.headers["content-type"] == "application/json"
    assert chat.json()["error"]["code"] == "internal_error"
    assert "a bug in the store" not in chat.text  # what broke is for the log, not the client
    messages = httpx.post(
        harness.gateway.base_url + "/messages",
        headers=auth,
        json={"model": "auto", "max_tokens": 5, "messages": MESSAGES},
        timeout=30,
    )
    assert messages.status_code == 500 and messages.json()["type"] == "error"
    records = harness.events(CallRecord, at_least=2)
    assert [(r.outcome, r.http_status) for r in records[-2:]] == [("failed", 500)] * 2


def test_forbidden_disables_that_target_only(harness: Harness) -> None:
    harness.configure(SAME_PROVIDER)
    harness.upstream.script("a", then=Fail(403, "this key may not use a"))
    client = harness.client()
    assert (
        client.chat.completions.create(model="auto", messages=MESSAGES).choices[0].message.content
        == "Hello from c."
    )
    assert (
        client.chat.completions.create(model="auto", messages=MESSAGES).choices[0].message.content
        == "Hello from c."
    )
    assert harness.upstream.count("a") == 1  # disabled, not retried, not probed
    snapshot = off_loop(
        lambda: asyncio.run(harness.runtime.store.snapshot(["p1/a", "p1/c"], ["p1"]))  # type: ignore[attr-defined]
    )
    assert snapshot.targets["p1/a"].state == "disabled"
    assert "p1" not in snapshot.providers or not snapshot.providers["p1"].disabled


def test_a_direct_address_names_only_a_model_its_provider_lists(harness: Harness) -> None:
    harness.configure(SAME_PROVIDER)
    client = harness.client()
    assert (
        client.chat.completions.create(model="p1/c", messages=MESSAGES).choices[0].message.content
        == "Hello from c."
    )
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="p1/made-up-1", messages=MESSAGES)
    assert harness.upstream.count("made-up-1") == 0
    assert "p1/made-up-1" not in harness.runtime.table._direct  # type: ignore[attr-defined]


def test_admin_keys_are_refused_on_v1(harness: Harness) -> None:
    from routing.services.api_keys import generate_key

    harness.configure(TWO_ROUTES)
    _, admin = generate_key(name="ops", kind="admin")
    client = openai.OpenAI(base_url=harness.gateway.base_url, api_key=admin, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as caught:
        client.chat.completions.create(model="auto", messages=MESSAGES)
    assert caught.value.code == "admin_key_not_allowed"
    assert "client key" in caught.value.message
    with pytest.raises(openai.PermissionDeniedError):
        client.models.list()
    assert harness.upstream.count() == 0


# -- item 7: values no request can carry ----------------------------------------------------
def test_a_stored_unsendable_credential_fails_over_as_a_configuration_failure(
    harness: Harness,
) -> None:
    from routing.models import Provider

    harness.configure(TWO_ROUTES)

    def poison() -> None:  # what an old row, written before validation, may hold
        row = Provider.objects.get(name="p1")
        row.set_api_key("sk-clé-ünicode")
        row.save()

    off_loop(poison)
    harness.runtime.invalidate()  # type: ignore[attr-defined]
    reply = harness.client().chat.completions.create(model="auto", messages=MESSAGES)
    assert reply.choices[0].message.content == "Hello from b."
    assert harness.upstream.count("a") == 0
    [call] = harness.events(CallRecord, at_least=1)
    assert call.outcome == "ok"
    assert call.attempts[0].code == "MISSING_CREDENTIAL"
    assert "not printable ASCII" in call.attempts[0].message

    harness.configure(TWO_ROUTES.replace("      - {provider: p2, model: b}\n", ""))
    off_loop(poison)
    harness.runtime.invalidate()  # type: ignore[attr-defined]
    only = httpx.post(
        harness.gateway.base_url + "/chat/completions",
        headers={"authorization": f"Bearer {harness.key}"},
        json={"model": "auto", "messages": MESSAGES},
        timeout=30,
    )
    assert only.status_code == 502
    assert only.headers["content-type"].startswith("application/json")
    assert only.json()["error"]["code"] == "ROUTES_EXHAUSTED"
    assert "MISSING_CREDENTIAL" in only.json()["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("api_key", "sk-clé"), ("api_key", "sk-a\tb"), ("headers", {"x-team": "équipe"})],
)
def test_an_unsendable_value_is_a_field_error_on_every_write_path(
    harness: Harness, field: str, value: object
) -> None:
    from routing.admin import ProviderAdminForm
    from routing.config.errors import ConfigError
    from routing.config.schema import parse_provider
    from routing.services.api_keys import generate_key

    raw = {"name": "bad", "base_url": harness.upstream.base_url, field: value}
    # the shared schema (file loader and services)
    with pytest.raises(ConfigError) as caught:
        parse_provider(raw)
    assert [e.path.split(".")[0] for e in caught.value.errors] == [field]
    assert "printable ASCII" in str(caught.value)
    # the management API
    _, admin = generate_key(name="ops", kind="admin")
    api = httpx.post(
        harness.gateway.url + "/api/v1/providers",
        headers={"authorization": f"Bearer {admin}"},
        json=raw,
        timeout=10,
    )
    assert api.status_code == 422
    assert "printable ASCII" in api.text
    # the admin form
    form = ProviderAdminForm(
        data={
            "name": "bad",
            "kind": "openai",
            "base_url": harness.upstream.base_url,
            "headers": '{"x-team": "\\u00e9quipe"}' if field == "headers" else "{}",
            "models": "[]",
            "connect_timeout_s": 5,
            "headers_timeout_s": 10,
            "first_token_timeout_s": 60,
            "idle_timeout_s": 60,
            "total_timeout_s": 600,
            "api_key": value if field == "api_key" else "",
        }
    )
    assert not off_loop(form.is_valid)
    assert "printable ASCII" in " ".join(form.errors.get(field, []))


# -- item 9: management API paths answer JSON -----------------------------------------------
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/targets/abc/reset"),
        ("DELETE", "/keys/not-a-number"),
        ("PATCH", "/groups/auto/targets/1.5"),
        ("GET", "/no-such-thing"),
    ],
)
def test_a_wrong_path_parameter_answers_json(harness: Harness, method: str, path: str) -> None:
    from routing.services.api_keys import generate_key

    _, admin = generate_key(name="ops", kind="admin")
    response = httpx.request(
        method,
        harness.gateway.url + "/api/v1" + path,
        headers={"authorization": f"Bearer {admin}"},
        timeout=10,
    )
    assert response.status_code in (404, 422)
    assert response.headers["content-type"].startswith("application/json")
    assert "detail" in response.json()
