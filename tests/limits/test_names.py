"""The limit names are declared once, by ``LimitsIn`` (``LIMIT_NAMES``): the compiled
``LimitSet`` and the rules' table mirror it (the pure side cannot import pydantic), and
every place that lists them to a person derives the list — ``createkey --limit``'s help,
the API's key schema, the keys page."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from routing.api.config_api.schemas import KeyIn
from routing.config.schema import LIMIT_NAMES, LimitsIn
from routing.limits.rules import RULE_OF_LIMIT
from routing.limits.spec import LimitSet
from routing.management.commands.createkey import Command as CreateKey


def _listed(text: str) -> tuple[str, ...]:
    """The names in a ``a, b, c`` list (as each surface writes it)."""
    return tuple(name.strip() for name in text.split(","))


def test_the_compiled_limit_set_and_its_rules_have_the_declared_names_in_order() -> None:
    assert LIMIT_NAMES == tuple(LimitsIn.model_fields)
    assert tuple(f.name for f in fields(LimitSet)) == LIMIT_NAMES
    assert tuple(RULE_OF_LIMIT) == LIMIT_NAMES  # each limit has its counter rule


def test_createkey_help_lists_the_declared_names() -> None:
    parser = CreateKey().create_parser("manage.py", "createkey")
    (action,) = [a for a in parser._actions if "--limit" in a.option_strings]
    assert action.help is not None
    assert _listed(action.help.rpartition(": ")[2]) == LIMIT_NAMES


def test_the_api_key_schema_documents_the_declared_names() -> None:
    limits = KeyIn.model_json_schema()["properties"]["limits"]
    assert _listed(limits["description"].partition(" (SPEC")[0]) == LIMIT_NAMES
    assert tuple(limits["properties"]) == LIMIT_NAMES


@pytest.mark.django_db
def test_the_keys_page_lists_the_declared_names() -> None:
    client = Client()
    client.force_login(
        User.objects.create_user("operator", password="pw-0123456789", is_staff=True)
    )
    html = client.get(reverse("dashboard:keys")).content.decode()
    found = re.search(r"<span class=\"muted\" data-limit-names>([^;<]*);", html)
    assert found is not None, html
    assert _listed(found.group(1)) == LIMIT_NAMES
