"""The fallback chain panel's seed-003 details: the effective retry settings, the record
count and capacity, the chain-end marker, rewrites per step; and a provider with exactly
one model adopting it in the add-target row."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.test import Client

from routing.gateway.events import AttemptRecord, CallRecord
from routing.models import Group

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_chain_panel_shows_retry_settings_records_end_marker_and_rewrites(
    staff_client: Client, configure: Callable[..., None], fresh_runtime: object
) -> None:
    configure()
    from routing.audit import writer

    record = CallRecord(
        call_id="c1", group="auto", session="s", stream=False, started_at=time.time()
    )
    record.attempts = [
        AttemptRecord(
            target="p1/a", try_number=1, ok=False, elapsed_ms=3.0, code="SERVER", status=500
        ),
        AttemptRecord(
            target="p2/b",
            try_number=1,
            ok=True,
            elapsed_ms=5.0,
            rewrites=("strip-reasoning:2", "model-changed-notice"),
        ),
    ]
    record.served_by, record.elapsed_ms = "p2/b", 9.0
    fresh_runtime.hub.publish(record)  # type: ignore[attr-defined]
    writer.flush(5.0)
    html = staff_client.get("/groups/").content.decode()
    card = html[html.index('data-group="auto"') : html.index('data-group="solo"')]
    assert "5 retries per target, 500→10000 ms" in card
    assert card.count("data-chain-end") == 1
    assert card.index("<code>p2/b</code>") < card.index("data-chain-end")
    assert "1 record kept, capacity 200000" in card
    assert "rewrote: strip-reasoning:2, model-changed-notice" in card


def test_a_provider_with_one_model_adopts_it(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    options = staff_client.get(
        "/groups/solo/targets/models/", {"provider": "p1"}, **HTMX
    ).content.decode()
    assert '<option value="" selected disabled>' in options  # two models: nothing chosen
    Group.objects.get(name="solo").targets.all().delete()
    one = staff_client.get(
        "/groups/solo/targets/models/", {"provider": "p2"}, **HTMX
    ).content.decode()
    assert '<option value="b" selected>b</option>' in one
    assert '<option value="" disabled>' in one


def test_live_and_stored_calls_carry_the_same_rewrites() -> None:
    from types import SimpleNamespace

    from dashboard.chain import call_from_record, fold_attempts

    live = AttemptRecord(
        target="p2/b", try_number=1, ok=True, elapsed_ms=1.0, rewrites=("tool-loop-notice",)
    )
    stored = SimpleNamespace(
        target="p2/b",
        ok=True,
        code="",
        status=None,
        elapsed_ms=1.0,
        probe=False,
        rewrites="tool-loop-notice",
    )
    assert (
        fold_attempts([live])[0].rewrites
        == fold_attempts([stored])[0].rewrites
        == ("tool-loop-notice",)
    )
    record = CallRecord(call_id="c", group="g", session=None, stream=False, started_at=0.0)
    record.attempts = [live]
    assert call_from_record(record).steps[0].rewrites == ("tool-loop-notice",)


def test_settings_page_edits_the_compaction_point_and_shows_its_warning(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    from tests.dashboard.conftest import TWO_GROUPS

    configure(
        TWO_GROUPS.replace(
            "    circuit: {cooldown_base_ms: 20000}\n", "    compact_window: 10000\n"
        )
    )
    html = staff_client.get("/groups/auto/settings/").content.decode()
    start = html.index('data-field="compact_window"')
    block = html[start : html.index('data-field="', start + 10)]
    assert 'value="10000"' in block and "data-overridden" in block
    assert "Warning: compact_window 10000 is below 12484" in html
