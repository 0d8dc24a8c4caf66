"""Ready-made upstreams for ``python -m routing.simulator`` and ``manage.py demo``.

The ``demo`` preset matches ``routing/simulator/demo.yaml`` (provider ``sim``):

- ``flaky-model``: 503 on 2 of every 3 requests (``Flaky(3)``), so the ``auto`` group,
  which retries in place twice, visibly retries and then succeeds;
- ``broken-model``: always 503, so the ``failover`` group visibly switches;
- ``steady-model``: always answers, 8 chunks 30 ms apart so streaming is visible.

Any other model gets a 404 ``model_not_found``, as a real provider would answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from routing.simulator.script import Fail, Flaky, Reply
from routing.simulator.server import FakeUpstream

DEMO_API_KEY = "demo-upstream-key"
DEMO_MODELS = ["flaky-model", "broken-model", "steady-model"]
DEMO_CONFIG = Path(__file__).with_name("demo.yaml")

_STREAMED = Reply(
    content="Hello from {model}! This answer arrives in eight small chunks, 30 ms apart.",
    chunks=8,
    chunk_delay_s=0.03,
)


def demo(host: str = "127.0.0.1", port: int = 9100) -> FakeUpstream:
    upstream = FakeUpstream(
        host,
        port,
        models=list(DEMO_MODELS),
        api_key=DEMO_API_KEY,
        default=Fail(404, "The model `{model}` does not exist.", code="model_not_found"),
    )
    overload = Fail(503, "{model} is overloaded (simulated)", code="server_overloaded")
    upstream.script("flaky-model", then=Flaky(3, fail=overload, ok=_STREAMED))
    upstream.script("broken-model", then=Fail(503, "{model} is down (simulated)"))
    upstream.script("steady-model", then=_STREAMED)
    return upstream


def plain(host: str = "127.0.0.1", port: int = 9100) -> FakeUpstream:
    """Answers every model with the default ``Reply``; script it over ``/_control``."""
    return FakeUpstream(host, port)


PRESETS: dict[str, Callable[[str, int], FakeUpstream]] = {"demo": demo, "plain": plain}


def describe(upstream: FakeUpstream, preset: str) -> str:
    """The one line a foreground runner prints."""
    line = f"Switchyard simulator ({preset}) listening on {upstream.base_url}"
    if preset == "demo":
        line += (
            f" - models {', '.join(DEMO_MODELS)}; load {DEMO_CONFIG} with "
            f"SWITCHYARD_DEMO_PORT={upstream.port}; Ctrl-C stops"
        )
    return line
