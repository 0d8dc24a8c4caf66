"""Where an action's answer is said (``dashboard.feedback``): the server renders one
visible feedback line, in the slot of the control that was pressed, with the banner's
outcome. The browser side (scrolling, network errors) is in ``test_feedback_browser``."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from dashboard.feedback import CONFLICT_TEXT, REJECTED_TEXT, Feedback, Tone, outcome
from routing.models import Group
from tests.dashboard.test_views import HTMX, field_block, form_post

LINE = re.compile(r'<p class="feedback[^"]*" data-feedback([^>]*)>(.*?)</p>', re.S)


def shown(html: str) -> list[tuple[str, str]]:
    """``(tone, text)`` of every feedback line that is not hidden."""
    lines = []
    for attrs, body in LINE.findall(html):
        if " hidden" in attrs:
            continue
        tone = re.search(r'data-tone="(\w+)"', attrs).group(1)  # type: ignore[union-attr]
        lines.append((tone, re.sub(r"<[^>]+>", "", body).strip()))
    return lines


def action_bar(html: str) -> str:
    return html[html.index('<div class="form-actions">') :]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({}, None),
        ({"notice": "Saved."}, Feedback(Tone.OK, "Saved.")),
        ({"rejected": True, "notice": "Saved."}, Feedback(Tone.ERROR, REJECTED_TEXT)),
        ({"general_errors": ["a", "b"], "rejected": True}, Feedback(Tone.ERROR, "Not saved: a; b")),
        ({"error": "Could not load", "notice": "x"}, Feedback(Tone.ERROR, "Could not load")),
        ({"conflict": True, "rejected": True}, Feedback(Tone.CONFLICT, CONFLICT_TEXT)),
    ],
)
def test_one_outcome_most_serious_first(state: dict[str, object], expected: object) -> None:
    assert outcome(**state) == expected  # type: ignore[arg-type]


def test_policy_answers_are_said_in_the_action_bar(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    stale = staff_client.get("/groups/auto/settings/").content.decode()
    assert shown(stale) == []

    saved = staff_client.post(
        "/groups/auto/settings/", form_post(stale, retry__max_retries="2"), **HTMX
    ).content.decode()
    assert shown(saved) == [("ok", "Saved max retries. The next call uses it.")]
    assert shown(action_bar(saved)) == shown(saved)

    rejected = staff_client.post(
        "/groups/auto/settings/", form_post(saved, circuit__cooldown_base_ms="-5"), **HTMX
    )
    assert rejected.status_code == 422
    assert shown(action_bar(rejected.content.decode())) == [("error", REJECTED_TEXT)]

    conflict = staff_client.post(
        "/groups/auto/settings/", form_post(stale, retry__max_retries="7"), **HTMX
    )
    assert conflict.status_code == 409
    html = conflict.content.decode()
    assert shown(action_bar(html)) == [("conflict", CONFLICT_TEXT + " Reload")]
    assert 'data-reload-url="/groups/auto/settings/"' in action_bar(html)


def test_a_restored_field_is_answered_in_its_row(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    data = form_post(staff_client.get("/groups/auto/settings/").content.decode())
    data["field"] = "circuit.cooldown_base_ms"
    html = staff_client.post("/groups/auto/settings/restore/", data, **HTMX).content.decode()
    said = [("ok", "Restored cooldown: it now shows the inherited value.")]
    assert shown(field_block(html, "circuit.cooldown_base_ms")) == said
    assert shown(html) == said  # once, there


def test_a_target_action_is_answered_in_its_row(
    staff_client: Client, configure: Callable[..., None]
) -> None:
    configure()
    group = Group.objects.get(name="auto")
    first, second = group.targets.order_by("position")

    def row(html: str, key: str) -> str:
        start = html.index(f'<tr data-target="{key}"')
        ends = [html.find(mark, start + 1) for mark in ("<tr data-target=", 'class="add-target"')]
        return html[start : min(end for end in ends if end != -1)]

    disabled = staff_client.post(
        f"/groups/auto/targets/{second.pk}/enabled/",
        {"enabled": "0", "based_on": group.version},
        **HTMX,
    ).content.decode()
    assert shown(row(disabled, "p2/b")) == [("ok", "Target disabled: calls skip it.")]
    assert shown(disabled) == shown(row(disabled, "p2/b"))

    moved = staff_client.post(
        "/groups/auto/targets/reorder/",
        {"order": f"{second.pk},{first.pk}", "target": second.pk, "based_on": group.version},
        **HTMX,
    )
    assert moved.status_code == 409  # based on the version before the disable
    html = moved.content.decode()
    assert shown(row(html, "p2/b")) == [
        ("conflict", "Not saved: this group was changed in another window — reload to see it.")
    ]

    removed = staff_client.post(
        f"/groups/auto/targets/{second.pk}/remove/",
        {"based_on": Group.objects.get(name="auto").version},
        **HTMX,
    ).content.decode()
    foot = removed[removed.index('class="add-target"') :]
    assert shown(foot) == [("ok", "Target removed.")] == shown(removed)
