"""Target keys: built and split in one place (``routing.engine.targets``)."""

from __future__ import annotations

import pytest

from routing.engine.targets import TargetKeyParts, provider_of, split_target_key, target_key


def test_a_key_is_provider_slash_model_and_splits_back_at_the_first_slash() -> None:
    key = target_key("openrouter", "meta-llama/llama-3-70b")
    assert key == "openrouter/meta-llama/llama-3-70b"
    assert split_target_key(key) == TargetKeyParts("openrouter", "meta-llama/llama-3-70b")
    assert provider_of(key) == "openrouter"


@pytest.mark.parametrize("text", ["", "gpt-4o", "/gpt-4o", "openai/", "/"])
def test_text_without_both_sides_is_no_key(text: str) -> None:
    assert split_target_key(text) is None


def test_provider_of_text_without_a_slash_is_all_of_it() -> None:
    assert provider_of("openai") == "openai"
