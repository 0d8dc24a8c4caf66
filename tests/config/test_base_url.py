"""A provider's ``base_url`` never points at a cloud metadata service and carries no query
or fragment (issue 37 item 6; SPEC §9 as amended 2026-12-07); private ranges and loopback
stay allowed. One schema, so the file, the API, the page and the admin refuse alike."""

from __future__ import annotations

import re

import pytest

from routing.config.errors import ConfigError
from routing.config.schema import parse_provider
from routing.config.schema.types import METADATA_URL_PATTERN, URL_PATTERN
from routing.engine.addresses import metadata_address, metadata_host

ALLOWED = [
    "http://127.0.0.1:9100/v1",
    "http://localhost:11434/v1",
    "http://10.1.2.3/v1",
    "http://192.168.1.5:8080/v1",
    "http://172.16.0.9/v1",
    "http://100.64.0.1/v1",  # carrier-grade NAT, not Alibaba's one address
    "http://169.255.0.1/v1",
    "http://[::1]:8000/v1",
    "http://[fd00::1]/v1",  # private IPv6
    "https://api.example.com/v1",
    "https://metadata.example.com/v1",
]
METADATA = [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials",
    "http://169.254.170.2/v2/credentials",  # ECS task credentials: link-local too
    "http://[fd00:ec2::254]/latest",
    "http://[fe80::1]/v1",
    "http://100.100.100.200/latest/meta-data",
    "http://metadata.google.internal/computeMetadata/v1",
    "http://METADATA.Google.Internal./computeMetadata/v1",
    "http://metadata.azure.com/metadata/instance",
]
WITH_PATH_TRICKS = [
    "http://127.0.0.1:9/v1?x=",
    "http://127.0.0.1:9/v1#",
    "http://h.example.com/a?b#c",
]


def _refusal(url: str) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_provider({"name": "p", "base_url": url})
    [error] = refused.value.errors
    assert error.path == "base_url"
    return error.message


@pytest.mark.parametrize("url", ALLOWED)
def test_private_and_loopback_upstreams_stay_allowed(url: str) -> None:
    assert parse_provider({"name": "p", "base_url": url}).base_url == url


@pytest.mark.parametrize("url", METADATA)
def test_a_cloud_metadata_service_is_refused_with_a_field_error(url: str) -> None:
    assert "is a cloud metadata service, never an upstream" in _refusal(url)


@pytest.mark.parametrize("url", WITH_PATH_TRICKS)
def test_a_query_or_a_fragment_is_refused(url: str) -> None:
    assert "must not carry a query (?) or a fragment (#)" in _refusal(url)


def test_the_addresses_themselves() -> None:
    assert metadata_address("::ffff:169.254.169.254")  # IPv4-mapped
    assert metadata_address("fe80::1%eth0")  # with a zone
    assert not metadata_address("127.0.0.1") and not metadata_address("not-an-address")
    assert metadata_host("[FD00:EC2::254]") and not metadata_host("[fd00::254]")


def test_the_document_says_what_is_refused() -> None:
    """A schema-driven client reads the same rule: the documented pattern, less these."""
    for url in ALLOWED:
        if re.match(URL_PATTERN, url):
            assert not re.match(METADATA_URL_PATTERN, url), url
    for url in ("http://169.254.169.254/latest", "http://metadata.google.internal/x"):
        assert re.match(URL_PATTERN, url) and re.match(METADATA_URL_PATTERN, url)
