"""A provider's platform (SPEC §19) through the API, the file and the admin: the one check
every write path shares, the document that states it, and what a provider shows of it."""

from __future__ import annotations

from typing import Any

import pytest

from routing.config.errors import ConfigError
from routing.config.export import export_config
from routing.config.yaml import load_text
from routing.models import Provider
from routing.platforms.base import PlatformSettings, PlatformSpec
from routing.protocols import Protocol
from routing.protocols.registry import PLATFORMS
from tests.api.conftest import Api


def _errors(response: Any) -> dict[str, str]:
    return {".".join(map(str, e["loc"][1:])): e["msg"] for e in response.json()["detail"]}


def test_a_platforms_check_names_the_field_it_needs_and_the_kinds_it_carries() -> None:
    cloud = PlatformSpec(
        "cloud",
        "a cloud",
        frozenset({Protocol.MESSAGES}),
        fields=("region", "project"),
        required=("region",),
    )
    problems = cloud.check("openai", "", "", PlatformSettings(project="p"))
    assert problems == {
        "kind": "platform 'cloud' carries anthropic, not 'openai'",
        "region": "platform 'cloud' needs a region",
        "base_url": "platform 'cloud' needs a base_url",
    }
    assert cloud.check("anthropic", "http://x.test/v1", "", PlatformSettings(region="r")) == {}
    regional = PlatformSpec("aws", "", frozenset(), region_pattern=r"[a-z]{2}(-[a-z]+)+-[0-9]")
    assert regional.check("", "u", "", PlatformSettings(region="us-east-1")).keys() == {"kind"}
    assert regional.check("", "u", "", PlatformSettings(region="Narnia"))["region"] == (
        "'Narnia' is not a region of platform 'aws'"
    )


def test_a_direct_provider_needs_a_base_url_and_reads_no_platform_field(api: Api) -> None:
    refused = api.post("/providers", {"name": "p1", "region": "us-east-1"})
    assert refused.status_code == 422
    assert _errors(refused) == {
        "base_url": "platform 'direct' needs a base_url",
        "region": "platform 'direct' does not use region",
    }
    unknown = api.post("/providers", {"name": "p1", "base_url": "http://x.test", "platform": "x"})
    assert unknown.status_code == 422 and "platform" in _errors(unknown)
    assert not Provider.objects.exists()  # bad input changes nothing


def test_a_provider_shows_its_platform_and_never_a_secret(api: Api) -> None:
    made = api.post("/providers", {"name": "p1", "base_url": "http://x.test/v1"})
    assert made.status_code == 201, made.content
    shown = made.json()
    assert shown["platform"] == "direct" and shown["base_url"] == "http://x.test/v1"
    assert shown["region"] == shown["project"] == shown["credentials_file"] == ""
    assert shown["entra"] is False and shown["aws_keys_set"] == []


def test_the_document_states_each_platforms_rules(api: Api) -> None:
    document = api.get("/openapi.json").json()
    body = document["paths"]["/api/v1/providers"]["post"]["requestBody"]["content"]
    schema = body["application/json"]["schema"]
    rules = {
        rule["if"]["properties"]["platform"]["const"]: rule["then"] for rule in schema["allOf"]
    }
    assert set(rules) == set(PLATFORMS)
    direct = rules["direct"]
    assert "base_url" in direct["required"] and direct["properties"]["base_url"]["minLength"] == 1
    assert direct["properties"]["region"] == {"type": "null"}


@pytest.mark.django_db
def test_a_file_names_the_platform_field_it_got_wrong() -> None:
    with pytest.raises(ConfigError) as refused:
        load_text("providers:\n  - {name: p1, kind: openai, project: acme}\n")
    messages = {str(error) for error in refused.value.errors}
    assert "providers.0.base_url: platform 'direct' needs a base_url" in messages
    assert "providers.0.project: platform 'direct' does not use project" in messages


@pytest.mark.django_db
def test_a_direct_provider_exports_as_before() -> None:
    Provider.objects.create(name="p1", kind="openai", base_url="http://x.test/v1")
    text = export_config()
    assert "platform" not in text and "region" not in text
    assert load_text(text).providers[0].platform == "direct"


def test_moving_off_bedrock_drops_the_aws_keys_so_the_export_loads_back(api: Api) -> None:
    made = api.post(
        "/providers",
        {
            "name": "c",
            "kind": "anthropic",
            "platform": "bedrock",
            "region": "us-east-1",
            "aws_access_key_id": "AKIAMOVINGOFFBEDROCK",
            "aws_secret_access_key": "moving-off-bedrock-secret",
        },
    )
    assert made.status_code == 201, made.content
    assert made.json()["aws_keys_set"] == ["aws_access_key_id", "aws_secret_access_key"]
    moved = api.patch(
        "/providers/c",
        {"platform": "direct", "region": None, "base_url": "http://x.test"},
        if_match=api.etag("/providers/c"),
    )
    assert moved.status_code == 200, moved.content
    assert moved.json()["aws_keys_set"] == []
    assert Provider.objects.get(name="c").platform_secrets_encrypted == {}
    assert load_text(export_config()).providers[0].platform == "direct"


def test_the_api_refuses_a_bedrock_api_key_beside_aws_keys(api: Api) -> None:
    both = {
        "name": "c",
        "kind": "anthropic",
        "platform": "bedrock",
        "region": "us-east-1",
        "api_key": "a-bedrock-api-key",
        "aws_access_key_id": "AKIABOTHKEYSREVIEW01",
        "aws_secret_access_key": "both-keys-secret",
    }
    refused = api.post("/providers", both)
    assert refused.status_code == 422
    assert [e["loc"][-1] for e in refused.json()["detail"]] == ["api_key"]


def test_a_bedrock_update_is_checked_with_the_keys_it_keeps(api: Api) -> None:
    made = api.post(
        "/providers",
        {
            "name": "c",
            "kind": "anthropic",
            "platform": "bedrock",
            "region": "us-east-1",
            "aws_access_key_id": "ASIAROTATEDREVIEW001",
            "aws_secret_access_key": "rotated-review-secret",
            "aws_session_token": "first-session-token",
        },
    )
    assert made.status_code == 201, made.content
    rotated = api.patch(
        "/providers/c",
        {"aws_session_token": "second-session-token"},
        if_match=api.etag("/providers/c"),
    )
    assert rotated.status_code == 200, rotated.content  # goes with the stored keys
    kept = Provider.objects.get(name="c").platform_settings()
    assert (kept.aws_access_key_id, kept.aws_session_token) == (
        "ASIAROTATEDREVIEW001",
        "second-session-token",
    )
    unpaired = api.patch(
        "/providers/c", {"aws_access_key_id": None}, if_match=api.etag("/providers/c")
    )
    assert unpaired.status_code == 422, unpaired.content
    assert "aws_access_key_id" in unpaired.content.decode()
    assert Provider.objects.get(name="c").platform_settings() == kept  # nothing changed
