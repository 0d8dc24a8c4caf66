"""The seam to OpenAI Responses upstreams (``kind: openai-responses``): the base ends in
``/v1`` like ``openai`` and gets ``/responses``; errors are OpenAI-shaped."""

from __future__ import annotations

from routing.upstream.openai import OpenAIClient


class ResponsesClient(OpenAIClient):
    kind = "openai-responses"

    @staticmethod
    def endpoint_url(base_url: str) -> str:
        return base_url + "/responses"

    @staticmethod
    def test_body(model: str) -> dict[str, object]:
        return {"model": model, "input": "ping", "max_output_tokens": 16, "store": False}
