"""Calls to a provider made for the operator: refresh its model list, test it.

They go through the same client as a call (``routing.upstream``: the kind's endpoint,
credential header, exception translation and error classification), a short-lived one
per action with every timeout capped, so an operator never waits long. Upstream text is
scrubbed of every provider's secret, and of any 6+ character fragment of one (SPEC §9),
before it is shown.

A stored credential or header value no HTTP request can carry (written before validation
refused it) is a configuration failure here as on the call path: a ``ProviderCallError``
saying ``MISSING_CREDENTIAL`` and what to fix, never a ``UnicodeEncodeError``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from routing.config.errors import NotFound
from routing.crypto import CredentialDecryptError
from routing.engine.failures import Redactor
from routing.gateway.table import unsendable
from routing.models import Provider
from routing.protocols.registry import PLATFORMS, protocol_of
from routing.services.base import ProviderCallError, record
from routing.services.providers import get_provider, provider_snapshot
from routing.upstream.openai import OpenAIClient, Timeouts, UpstreamFailure

CALL_CAP_S = 30.0
MESSAGE_MAX = 300
SUMMARY_MAX = 120  # of an upstream's answer, in a 424 or a test result
MODEL_ID_MAX = 200
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ProviderTestResult:
    ok: bool
    latency_ms: float
    status: int | None
    message: str


def _redactor(secret: str, headers: dict[str, str], more: tuple[str, ...] = ()) -> Redactor:
    """Every provider's secret and header values, this one's included (they may not be
    stored yet), and this one's platform secrets (``more``)."""
    secrets = [secret, *headers.values(), *more]
    for row in Provider.objects.all():
        try:
            secrets += [row.get_api_key(), *row.get_headers().values()]
            secrets += row.platform_settings().secrets  # another provider's AWS keys too
        except CredentialDecryptError:
            continue
    return Redactor(secrets)


def _bounded(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"


def _summary(text: str) -> str:
    """A short summary of what the upstream answered, never its reply: the first line,
    whitespace collapsed, at most ``SUMMARY_MAX`` characters. An error's message fits; a
    page of whatever a misdirected URL serves does not come back through the gateway.
    Scrub before summarising, so a cut cannot split a secret below the fragment length."""
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 1] + "…"


def _client(provider: Provider) -> tuple[OpenAIClient, Redactor]:
    try:
        secret, headers = provider.get_api_key(), provider.get_headers()
        settings = provider.platform_settings()
    except CredentialDecryptError as exc:
        raise ProviderCallError(str(exc)) from None
    problem = unsendable(secret, headers, provider.base_url)
    if problem:  # the call path's verdict on the same row (Call._unsendable)
        raise ProviderCallError(f"MISSING_CREDENTIAL: {problem}: write it again")
    platform = PLATFORMS.get(provider.platform)
    if platform is None:  # stored before validation said so; the table's verdict too
        raise ProviderCallError(f"unknown platform '{provider.platform}'")
    protocol = protocol_of(provider.kind)
    redact = _redactor(secret, headers, settings.secrets)
    cap = min(provider.total_timeout_s, CALL_CAP_S)
    client = OpenAIClient(
        protocol=protocol,
        platform=platform,  # the call path's own reach: its URLs, credential and errors
        settings=settings,
        provider=provider.name,
        base_url=platform.resolve_base_url(protocol, provider.base_url, settings),
        api_key=secret,
        headers=headers,
        timeouts=Timeouts(
            connect_s=min(provider.connect_timeout_s, CALL_CAP_S),
            first_token_s=cap,
            idle_s=cap,
            total_s=cap,
        ),
        max_connections=1,
        redact=redact,
    )
    return client, redact


def _run(client: OpenAIClient, action: Callable[[], Awaitable[T]]) -> T:
    """Carry out ``action`` on the client, bounded by its total timeout, then close it."""

    async def bounded() -> T:
        try:
            async with asyncio.timeout(client.timeouts.total_s):
                return await action()
        finally:
            await client.aclose()

    return async_to_sync(bounded)()


def _listed(item: Any) -> Any:
    """A model list item's id: OpenAI's ``id``, or Google's ``name`` (``models/…``) for a
    model that can ``generateContent`` (Gemini lists embedding models beside them)."""
    if not isinstance(item, dict):
        return None
    if "id" in item:
        return item["id"]
    methods = item.get("supportedGenerationMethods")
    name = item.get("name")
    if isinstance(methods, list) and "generateContent" not in methods:
        return None
    return name.removeprefix("models/") if isinstance(name, str) else None


def _model_ids(body: Any) -> list[str]:
    """Ids from an OpenAI ``{"data": [{"id": …}]}`` list (Gemini's ``{"models": [{"name":
    …}]}``), in upstream order, deduplicated; ids the config schema would reject (blank,
    padded, too long) are dropped."""
    items = body.get("data", body.get("models")) if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ProviderCallError("the upstream's /models answer is not an OpenAI model list")
    ids: list[str] = []
    for item in items:
        model = _listed(item)
        if isinstance(model, str) and model == model.strip() and 0 < len(model) <= MODEL_ID_MAX:
            if model not in ids:
                ids.append(model)
    return ids


def _fetch_models(provider: Provider) -> list[str]:
    client, redact = _client(provider)
    url = client.models_url
    try:
        body = _run(client, client.model_list)
    except TimeoutError:
        raise ProviderCallError(f"could not reach {url}: timed out") from None
    except UpstreamFailure as exc:
        failure = exc.failure
        if failure.status is None:
            message = f"could not reach {url}: {failure.message}"
        else:
            message = f"HTTP {failure.status} from {url}: {_summary(redact(failure.message))}"
        raise ProviderCallError(_bounded(redact(message))) from None
    return _model_ids(body)


def provider_refresh_models(*, name: str, actor: str, path: str = "api") -> list[str]:
    """Load the model list from ``GET {base_url}/models`` and store it. A changed list bumps
    the provider's version and is recorded; an unchanged one only moves ``models_loaded_at``.
    No transaction is held across the network call."""
    models = _fetch_models(get_provider(name))
    with transaction.atomic():
        provider = Provider.objects.select_for_update().filter(name=name).first()
        if provider is None:
            raise NotFound("provider", name)
        loaded_at = timezone.now()
        if list(provider.models or []) == models:
            Provider.objects.filter(pk=provider.pk).update(models_loaded_at=loaded_at)
            return models
        before = provider_snapshot(provider)
        provider.models, provider.models_loaded_at = models, loaded_at
        provider.version += 1
        provider.save()
        record(
            actor=actor,
            path=path,
            object_type="provider",
            object_name=name,
            before=before,
            after=provider_snapshot(provider),
        )
    return models


def provider_test(*, name: str, model: str | None = None) -> ProviderTestResult:
    """One cheap non-streaming request (the kind's test body) to ``model`` (a target's
    "test this target"), else the provider's first model. Changes nothing: no health is
    charged and nothing is recorded."""
    provider = get_provider(name)
    if model is None and not provider.models:
        return ProviderTestResult(False, 0.0, None, "no models known: refresh models first")
    try:
        client, redact = _client(provider)
    except ProviderCallError as exc:
        return ProviderTestResult(False, 0.0, None, exc.message)
    model = model if model is not None else provider.models[0]
    body = orjson.dumps(client.test_body(model))

    async def ping() -> int:
        response = await client.send(
            body, model=model
        )  # a URL may name it (Gemini, Bedrock, Vertex)
        try:
            await response.read()
        finally:
            await response.aclose()
        return response.status_code

    started = time.perf_counter()
    try:
        status = _run(client, ping)
    except TimeoutError:
        elapsed_ms = (time.perf_counter() - started) * 1000
        return ProviderTestResult(False, elapsed_ms, None, "timed out")
    except UpstreamFailure as exc:
        elapsed_ms = (time.perf_counter() - started) * 1000
        failure = exc.failure
        return ProviderTestResult(
            False, elapsed_ms, failure.status, _summary(redact(failure.message))
        )
    elapsed_ms = (time.perf_counter() - started) * 1000
    return ProviderTestResult(True, elapsed_ms, status, f"{model} answered")
