"""History rules at the Responses door (SPEC §12–13), over real sockets: the ``openai``
SDK's ``responses`` client → Switchyard → the simulator, which records the exact body
each attempt sent. A Responses request passed through to a target of its own kind is
rewritten in its own shape; a history the view cannot read goes out untouched and
counted.
"""

from __future__ import annotations

from typing import Any

import pytest

from routing.gateway.continuity import STATS
from routing.simulator.script import Fail, Reply
from tests.conftest import Harness

CONFIG = """
providers:
  - {name: resp, kind: openai-responses, base_url: "{upstream}", api_key: upstream-key-resp}
groups:
  - name: resp-switch
    retry: {max_retries: 0}
    targets:
      - {provider: resp, model: r1}
      - {provider: resp, model: r2}
"""


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    return harness


def sent_to(h: Harness, model: str) -> dict[str, Any]:
    return dict([r for r in h.upstream.requests if r.model == model][-1].body)


def test_responses_door_unknown_shape_passes_through_counted(h: Harness) -> None:
    """A Codex session moved from r1 to r2 with a reasoning item whose ``summary`` is
    ``true``: r2 gets the input untouched, the call succeeds, the rewrite says why, and
    the count goes up (it used to fail the call with a TypeError)."""
    client = h.client(default_headers={"x-session-id": "s-odd-codex"})
    h.upstream.script("r1", Reply("from r1", reasoning="r1 thinks"))
    first = client.responses.create(model="resp-switch", input="hi", store=False)
    output = [item.model_dump(exclude_none=True) for item in first.output]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    output[0]["summary"] = True
    history = [{"role": "user", "content": "hi"}, *output, {"role": "user", "content": "and?"}]
    h.upstream.script("r1", Fail(503, "down"))
    h.upstream.script("r2", Reply("from r2"))
    before = STATS.unrewritable
    raw = client.responses.with_raw_response.create(model="resp-switch", input=history, store=False)
    assert raw.parse().output_text == "from r2"
    assert sent_to(h, "r2")["input"] == history
    assert raw.headers["x-switchyard-rewrites"] == "history-unrewritable"
    assert STATS.unrewritable == before + 1
