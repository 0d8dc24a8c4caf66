"""``config_change_record``: queued after commit, credentials redacted, a readable diff."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import transaction

from routing.audit import writer
from routing.audit.models import ConfigChange
from routing.audit.services import REDACTED, config_change_record
from tests.audit.conftest import clear_audit_tables

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def clean() -> None:
    writer.flush(10)
    clear_audit_tables()


def record(**overrides: object) -> None:
    arguments: dict[str, object] = {
        "actor": "user:alice",
        "path": "api",
        "object_type": "group",
        "object_name": "auto",
        "before": {"retry": {"max_retries": 5, "initial_delay_ms": 500}, "commit": "first-content"},
        "after": {"retry": {"max_retries": 2, "initial_delay_ms": 500}, "commit": "first-content"},
    }
    config_change_record(**{**arguments, **overrides})  # type: ignore[arg-type]


def test_a_change_is_recorded_with_a_dotted_diff() -> None:
    record()
    assert writer.flush(10)
    change = ConfigChange.objects.get()
    assert (change.actor, change.path, change.object_type, change.object_name) == (
        "user:alice",
        "api",
        "group",
        "auto",
    )
    assert change.diff == {"retry.max_retries": {"before": 5, "after": 2}}
    assert change.before["retry"]["max_retries"] == 5 and change.after["retry"]["max_retries"] == 2


def test_creation_and_deletion_diff_against_nothing() -> None:
    record(before=None, after={"name": "p3", "when": datetime(2030, 1, 1, tzinfo=UTC)})
    record(before={"name": "p3"}, after=None, object_name="p3")
    assert writer.flush(10)
    created, deleted = ConfigChange.objects.order_by("id")
    assert created.before is None
    assert created.diff == {
        "name": {"before": None, "after": "p3"},
        "when": {"before": None, "after": "2030-01-01T00:00:00Z"},
    }
    assert deleted.after is None and deleted.diff == {"name": {"before": "p3", "after": None}}


def test_credentials_and_header_values_are_redacted_but_their_change_shows() -> None:
    record(
        object_type="provider",
        object_name="p1",
        before={
            "api_key": "sk-old-secret",
            "headers": {"X-Trace": "a"},
            "client_secret": "",
            "token_url": None,
        },
        after={
            "api_key": "sk-new-secret",
            "headers": {"X-Trace": "b"},
            "client_secret": "",
            "token_url": None,
        },
    )
    record(
        object_type="provider",
        object_name="p2",
        before={"api_key": "same"},
        after={"api_key": "same"},
    )
    assert writer.flush(10)
    changed, unchanged = ConfigChange.objects.order_by("id")
    assert changed.diff == {
        "api_key": {"before": REDACTED, "after": REDACTED},
        "headers.X-Trace": {"before": REDACTED, "after": REDACTED},
    }
    assert changed.before == {
        "api_key": REDACTED,
        "headers": {"X-Trace": REDACTED},
        "client_secret": "",
        "token_url": None,
    }
    assert "sk-" not in str(ConfigChange.objects.values_list("before", "after", "diff"))
    assert unchanged.diff == {}


def test_field_names_that_only_contain_a_credential_word_are_not_redacted() -> None:
    record(
        object_type="provider",
        object_name="p1",
        before={"timeouts": {"first_token_s": 60}, "max_tokens": 10, "access_token": "t-old"},
        after={"timeouts": {"first_token_s": 30}, "max_tokens": 20, "access_token": "t-new"},
    )
    assert writer.flush(10)
    change = ConfigChange.objects.get()
    assert change.diff == {
        "access_token": {"before": REDACTED, "after": REDACTED},
        "max_tokens": {"before": 10, "after": 20},
        "timeouts.first_token_s": {"before": 60, "after": 30},
    }
    assert change.after["timeouts"] == {"first_token_s": 30}


def test_a_rolled_back_write_leaves_no_record() -> None:
    class Refused(Exception):
        pass

    with pytest.raises(Refused), transaction.atomic():
        record()
        raise Refused
    with transaction.atomic():
        record(object_name="committed")
    assert writer.flush(10)
    assert list(ConfigChange.objects.values_list("object_name", flat=True)) == ["committed"]


def test_an_unknown_path_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown config change path"):
        record(path="shell")
