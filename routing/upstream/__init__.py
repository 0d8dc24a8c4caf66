"""One client per upstream kind, all behind the same seam (``OpenAIClient.send``)."""

from __future__ import annotations

from routing.upstream.anthropic import AnthropicClient
from routing.upstream.openai import OpenAIClient
from routing.upstream.responses import ResponsesClient

CLIENTS: dict[str, type[OpenAIClient]] = {
    "openai": OpenAIClient,
    "anthropic": AnthropicClient,
    "openai-responses": ResponsesClient,
}


def client_class(kind: str) -> type[OpenAIClient]:
    return CLIENTS.get(kind, OpenAIClient)
