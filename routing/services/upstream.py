"""Calls to a provider made for the operator: refresh its model list, test it.

These run in a worker thread (sync views, the page's ``sync_to_async``), so they use a
short-lived ``httpx.Client`` rather than the runtime's pooled async client, and cap every
timeout so an operator never waits long. The credential is sent as ``Bearer`` and scrubbed
from every message that comes back (upstreams like to echo a rejected key).

A stored credential or header value no HTTP request can carry (written before validation
refused it) is a configuration failure here as on the call path: a ``ProviderCallError``
saying ``MISSING_CREDENTIAL`` and what to fix, never a ``UnicodeEncodeError``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
from django.db import transaction
from django.utils import timezone

from routing.crypto import CredentialDecryptError
from routing.engine.failures import Redactor
from routing.gateway.table import unsendable
from routing.models import Provider
from routing.services.base import NotFound, ProviderCallError, record
from routing.services.providers import get_provider, provider_snapshot
from routing.upstream import client_class

CALL_CAP_S = 30.0
MESSAGE_MAX = 300
MODEL_ID_MAX = 200


@dataclass(frozen=True, slots=True)
class ProviderTestResult:
    ok: bool
    latency_ms: float
    status: int | None
    message: str


def _client(provider: Provider) -> tuple[httpx.Client, str]:
    try:
        secret = provider.get_api_key()
    except CredentialDecryptError as exc:
        raise ProviderCallError(str(exc)) from None
    problem = unsendable(secret, provider.headers or {})
    if problem:  # the call path's verdict on the same row (Call._unsendable)
        raise ProviderCallError(f"MISSING_CREDENTIAL: {problem}: write it again")
    kind = client_class(provider.kind)
    headers = {**kind.kind_headers(), **(provider.headers or {})}
    if secret:
        headers.update(kind.credential_headers(secret))
    timeout = httpx.Timeout(
        min(provider.total_timeout_s, CALL_CAP_S),
        connect=min(provider.connect_timeout_s, CALL_CAP_S),
    )
    return httpx.Client(headers=headers, timeout=timeout, follow_redirects=False), secret


def _upstream_message(response: httpx.Response) -> str:
    """The OpenAI-shaped ``error.message`` when there is one, else the body text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return response.text


def _clean(text: str, secret: str) -> str:
    """Upstream text with every provider's secret and any 6+ character fragment of one
    removed (SPEC §9), then bounded."""
    secrets = [secret]
    for row in Provider.objects.exclude(api_key_encrypted=""):
        try:
            secrets.append(row.get_api_key())
        except CredentialDecryptError:
            continue
    text = Redactor(secrets)(text)
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"


def _model_ids(body: Any) -> list[str]:
    """Ids from an OpenAI ``{"data": [{"id": …}]}`` list, in upstream order, deduplicated;
    ids the config schema would reject (blank, padded, too long) are dropped."""
    items = body.get("data") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ProviderCallError("the upstream's /models answer is not an OpenAI model list")
    ids: list[str] = []
    for item in items:
        model = item.get("id") if isinstance(item, dict) else None
        if isinstance(model, str) and model == model.strip() and 0 < len(model) <= MODEL_ID_MAX:
            if model not in ids:
                ids.append(model)
    return ids


def _fetch_models(provider: Provider) -> list[str]:
    client, secret = _client(provider)
    url = client_class(provider.kind).models_url(provider.base_url.rstrip("/"))
    try:
        with client:
            response = client.get(url)
    except httpx.HTTPError as exc:
        message = f"could not reach {url}: {type(exc).__name__} {exc}"
        raise ProviderCallError(_clean(message, secret)) from None
    if not response.is_success:
        message = f"HTTP {response.status_code} from {url}: {_upstream_message(response)}"
        raise ProviderCallError(_clean(message, secret))
    try:
        body = response.json()
    except ValueError:
        raise ProviderCallError(f"the answer from {url} is not JSON") from None
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
    """One cheap non-streaming completion (``max_tokens: 1``) to ``model`` (a target's
    "test this target"), else the provider's first model. Changes nothing: no health is
    charged and nothing is recorded."""
    provider = get_provider(name)
    if model is None and not provider.models:
        return ProviderTestResult(False, 0.0, None, "no models known: refresh models first")
    try:
        client, secret = _client(provider)
    except ProviderCallError as exc:
        return ProviderTestResult(False, 0.0, None, exc.message)
    model = model if model is not None else provider.models[0]
    kind = client_class(provider.kind)
    url = kind.endpoint_url(provider.base_url.rstrip("/"))
    body = kind.test_body(model)
    started = time.perf_counter()
    try:
        with client:
            response = client.post(url, json=body)
    except httpx.HTTPError as exc:
        elapsed_ms = (time.perf_counter() - started) * 1000
        message = _clean(f"{type(exc).__name__} {exc}", secret)
        return ProviderTestResult(False, elapsed_ms, None, message)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if response.is_success:
        return ProviderTestResult(True, elapsed_ms, response.status_code, f"{model} answered")
    message = _clean(_upstream_message(response), secret)
    return ProviderTestResult(False, elapsed_ms, response.status_code, message)
