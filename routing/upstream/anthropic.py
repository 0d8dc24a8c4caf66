"""The seam to Anthropic Messages upstreams (``kind: anthropic``).

Same pooled client and the same one-place exception translation as ``openai``; only the
endpoint and the credential differ. The base URL is what Anthropic documents for its SDK
(``https://api.anthropic.com``): the gateway posts ``<base>/v1/messages``, or
``<base>/messages`` when the base already ends in ``/v1``.

Anthropic's error bodies (``{"type": "error", "error": {"type": "overloaded_error", ...}}``)
are read by the shared classifier: 529 ``overloaded_error`` → SERVER, 429
``rate_limit_error`` (with ``retry-after``) → RATE_LIMIT, 401 ``authentication_error`` →
AUTH, 400 "prompt is too long" → CONTEXT_WINDOW_EXCEEDED (``tests/engine/test_failures.py``).
"""

from __future__ import annotations

from routing.upstream.openai import OpenAIClient

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicClient(OpenAIClient):
    kind = "anthropic"

    @staticmethod
    def endpoint_url(base_url: str) -> str:
        return base_url + ("/messages" if base_url.endswith("/v1") else "/v1/messages")

    @staticmethod
    def models_url(base_url: str) -> str:
        return base_url + ("/models" if base_url.endswith("/v1") else "/v1/models")

    @staticmethod
    def test_body(model: str) -> dict[str, object]:
        return {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}

    @staticmethod
    def kind_headers() -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    @staticmethod
    def credential_headers(api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}
