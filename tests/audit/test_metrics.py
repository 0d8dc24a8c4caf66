"""``/metrics``: Prometheus text that parses, needs an admin key (unless made public), and
moves with calls."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from routing.simulator.script import Fail, StallAfter
from tests.audit.conftest import MESSAGES, RETRY_TWICE, Audit

ALLOWED_LABELS = {"group", "target", "code", "outcome", "le"}  # le: histogram buckets


def scrape(audit: Audit) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    reply = audit.api.get("/metrics")  # an admin key, as a Prometheus scrape config sends it
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, (sample.name, sample.labels)
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_and_histograms_move_as_calls_happen(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    before = scrape(audit)
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    audit.h.client().chat.completions.create(model="other", messages=MESSAGES)
    after = scrape(audit)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("switchyard_calls_total", group="auto", outcome="ok") == 1
    assert moved("switchyard_calls_total", group="other", outcome="ok") == 1
    assert moved("switchyard_attempts_total", target="p1/a", code="SERVER") == 3
    assert moved("switchyard_attempts_total", target="p2/b", code="OK") == 2
    assert moved("switchyard_retries_total", group="auto", target="p1/a", code="SERVER") == 2
    assert moved("switchyard_switches_total", group="auto", target="p1/a", code="SERVER") == 1
    assert moved("switchyard_time_to_first_token_seconds_count", group="auto") == 1
    assert moved("switchyard_gateway_overhead_seconds_count", group="auto") == 1
    assert moved("switchyard_health_transitions_total", target="p1/a", code="SERVER") == 1


def test_health_is_a_gauge_per_target_read_at_scrape_time(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    samples = scrape(audit)
    assert value(samples, "switchyard_target_health", target="p1/a") == 0
    audit.h.upstream.script("a", Fail(503), Fail(503), Fail(503))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    samples = scrape(audit)
    assert value(samples, "switchyard_target_health", target="p1/a") == 2  # cooling
    assert value(samples, "switchyard_target_health", target="p2/b") == 0
    assert 9 < value(samples, "switchyard_target_cooldown_remaining_seconds", target="p1/a") <= 10
    assert ("switchyard_audit_records_total", (("outcome", "written"),)) in samples


def test_calls_in_progress_count_an_open_stream_until_it_ends(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", StallAfter(2))
    assert value(scrape(audit), "switchyard_calls_in_progress") == 0
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            audit.h.gateway.base_url + "/chat/completions",
            headers={"authorization": f"Bearer {audit.h.key}"},
            json={"model": "auto", "messages": MESSAGES, "stream": True},
        ) as response,
    ):
        lines = response.iter_lines()  # kept: a dropped iterator closes the connection
        assert next(lines).startswith("data: ")
        assert value(scrape(audit), "switchyard_calls_in_progress") == 1
    for _ in range(3000):  # the gateway notices the client left, however busy the machine
        if value(scrape(audit), "switchyard_calls_in_progress") == 0:
            break
    assert value(scrape(audit), "switchyard_calls_in_progress") == 0


def test_a_disabled_provider_shows_as_disabled(audit: Audit) -> None:
    audit.h.configure(RETRY_TWICE)
    audit.h.upstream.script("a", Fail(401, "bad key"))
    audit.h.client().chat.completions.create(model="auto", messages=MESSAGES)
    samples = scrape(audit)
    assert value(samples, "switchyard_target_health", target="p1/a") == 3


def test_metrics_need_an_admin_key_unless_made_public(audit: Audit, settings) -> None:  # type: ignore[no-untyped-def]
    url = audit.h.gateway.url + "/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"authorization": f"Bearer {audit.h.key}"}).status_code == 401
    settings.SWITCHYARD = {**settings.SWITCHYARD, "METRICS_PUBLIC": True}
    assert httpx.get(url).status_code == 200


def test_a_mid_stream_rescue_is_counted_and_on_the_record(audit: Audit) -> None:
    from routing.audit.models import Attempt
    from routing.simulator.script import DropAfter, Reply

    audit.h.configure(
        RETRY_TWICE.replace("  - name: auto\n", "  - name: auto\n    resume: restart\n")
    )
    before = scrape(audit)
    audit.h.upstream.script("a", DropAfter(2, content="One two "))
    audit.h.upstream.script("b", Reply("One two three.", chunks=3))
    stream = audit.h.client().chat.completions.create(model="auto", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "One two three."
    audit.flush()
    after = scrape(audit)
    assert (
        value(after, "switchyard_rescues_total", group="auto", outcome="ok")
        - value(before, "switchyard_rescues_total", group="auto", outcome="ok")
        == 1
    )
    rows = list(Attempt.objects.order_by("index").values_list("target", "ok", "continuation"))
    assert rows == [("p1/a", True, False), ("p2/b", True, True)]
    [call] = audit.api.get("/api/v1/calls").json()
    assert [a["continuation"] for a in call["attempts"]] == [False, True]


def test_a_labelled_child_is_made_once_and_is_the_metric_s_own() -> None:
    """``observe`` looks a child up by its label values instead of calling ``labels()``
    each time: it must be the very child ``labels()`` gives, so a scrape sees its counts."""
    from routing.gateway.events import CallOutcome
    from routing.observability import metrics

    child = metrics._calls("children-test", CallOutcome.OK)
    assert child is metrics.CALLS.labels("children-test", CallOutcome.OK)
    assert metrics._calls("children-test", CallOutcome.OK) is child
    before = child._value.get()
    metrics._calls("children-test", CallOutcome.OK).inc()
    assert metrics.CALLS.labels("children-test", "ok")._value.get() == before + 1


def test_tokens_and_cost_count_every_billed_attempt_at_its_own_target() -> None:
    """The same attempts as the budgets and the ledger (SPEC §17): a call that failed
    after its first attempt reported usage, then failed elsewhere without any, counts
    the first attempt's tokens and cost under that attempt's target."""
    from routing.gateway.events import AttemptRecord, CallOutcome, CallRecord
    from routing.observability import metrics

    def sample(name: str, target: str) -> float:
        labels = {"group": "billed-test", "target": target}
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    before = {
        (name, target): sample(name, target)
        for name in ("switchyard_input_tokens_total", "switchyard_cost_total")
        for target in ("p1/a", "p1/b")
    }
    record = CallRecord(
        call_id="billed",
        group="billed-test",
        session=None,
        stream=True,
        started_at=0.0,
        outcome=CallOutcome.FAILED,  # served by none
        attempts=[
            AttemptRecord(
                target="p1/a",
                try_number=1,
                ok=False,
                elapsed_ms=1.0,
                usage={"prompt_tokens": 30, "completion_tokens": 0},
                cost=0.25,
            ),
            AttemptRecord(target="p1/b", try_number=1, ok=False, elapsed_ms=1.0),
        ],
    )
    metrics.observe(record)
    after = {key: sample(*key) for key in before}
    assert after[("switchyard_input_tokens_total", "p1/a")] == (
        before[("switchyard_input_tokens_total", "p1/a")] + 30
    )
    assert after[("switchyard_cost_total", "p1/a")] == (
        before[("switchyard_cost_total", "p1/a")] + 0.25
    )
    assert (
        after[("switchyard_input_tokens_total", "p1/b")]
        == (before[("switchyard_input_tokens_total", "p1/b")])
    )
