"""How a platform's credential and configuration failures are classified (found in the
review of the platforms): a credential service that does not answer is a blip that cools
the target (TRANSPORT), a refusal is AUTH naming the provider, never a 500; a Bedrock
model id the target cannot serve switches (UNKNOWN_MODEL); a key and its alternative
together are refused where they are written."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from botocore.credentials import RefreshableCredentials
from botocore.exceptions import ClientError, EndpointConnectionError

from routing.engine.failures import FailureCode
from routing.platforms.base import PlatformSettings
from routing.platforms.bedrock import SigV4Signer, classify_bedrock
from routing.protocols.registry import PLATFORMS
from routing.upstream.base import UpstreamFailure


def _expired(refresh: Callable[[], Any]) -> RefreshableCredentials:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    return RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": "ASIAEXPIREDREVIEW001",
            "secret_key": "expired-review-secret",
            "token": "expired-review-token",
            "expiry_time": past.isoformat(),
        },
        refresh_using=refresh,
        method="review-test",
    )


def _sign(refresh: Callable[[], Any]) -> UpstreamFailure:
    signer = SigV4Signer("claude-bedrock", "us-east-1", _expired(refresh))
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke"
    with pytest.raises(UpstreamFailure) as failed:
        asyncio.run(signer.headers("POST", url, b"{}", {}))
    return failed.value


def test_a_credential_service_that_does_not_answer_is_transport() -> None:
    def unreachable() -> Any:
        raise EndpointConnectionError(endpoint_url="https://sts.amazonaws.com")

    failure = _sign(unreachable).failure
    assert failure.code is FailureCode.TRANSPORT and "claude-bedrock" in failure.message


def test_a_role_sts_refuses_is_auth_not_a_500() -> None:
    def refused() -> Any:
        error = {"Error": {"Code": "AccessDenied", "Message": "not authorized"}}
        raise ClientError(error, "AssumeRole")

    failure = _sign(refused).failure
    assert failure.code is FailureCode.AUTH and "claude-bedrock" in failure.message
    assert "expired-review" not in failure.message


@pytest.mark.parametrize(
    "message",
    [
        "The provided model identifier is invalid.",
        "Invocation of model ID anthropic.claude-x with on-demand throughput isn't supported."
        " Retry your request with the ID or ARN of an inference profile that contains this model.",
    ],
)
def test_a_model_id_the_target_cannot_serve_switches(message: str) -> None:
    headers = {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/"}
    failure = classify_bedrock(400, orjson.dumps({"message": message}), headers, now=0.0)
    assert failure.code is FailureCode.UNKNOWN_MODEL
    other = classify_bedrock(400, b'{"message":"messages: field required"}', headers, now=0.0)
    assert other.code is FailureCode.BAD_REQUEST


def test_an_api_key_beside_its_alternative_is_refused_by_the_platform() -> None:
    keys = PlatformSettings(region="us-east-1", aws_access_key_id="A", aws_secret_access_key="S")
    assert "api_key" in PLATFORMS["bedrock"].check("anthropic", "", "bedrock-key", keys)
    entra = PlatformSettings(entra=True)
    assert "api_key" in PLATFORMS["azure"].check("openai", "https://r.test/v1", "k", entra)
    assert PLATFORMS["azure"].check("openai", "https://r.test/v1", "", entra) == {}
