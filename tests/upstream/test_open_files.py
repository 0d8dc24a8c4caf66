"""The open-file limit a server raises at start, and the upstream pool sized from it.

Limits are process-wide, so each case runs in a fresh interpreter that first lowers its own
soft (and, for the "cannot" case, hard) limit, then does what the server does at start.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOFT, HARD = resource.getrlimit(resource.RLIMIT_NOFILE)


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SWITCHYARD_VAR_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    for name in ("DATABASE_URL", "REDIS_URL", "SWITCHYARD_CONFIG"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


PRELUDE = """
import json, logging, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
"""


def test_start_raises_the_soft_limit_to_what_is_wanted(tmp_path: Path) -> None:
    done = run_python(
        PRELUDE
        + """
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
from routing.gateway.limits import raise_open_file_limit, upstream_connections
got = raise_open_file_limit(wanted=2048)
print(json.dumps({"after": got.after, "before": got.before, "now":
    resource.getrlimit(resource.RLIMIT_NOFILE)[0], "pool": upstream_connections()}))
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"after": 2048, "before": 256, "now": 2048, "pool": (2048 - 256) // 2}
    assert "open-file limit raised from 256 to 2048" in done.stderr


def test_a_hard_limit_below_the_wish_is_used_in_full_and_reported(tmp_path: Path) -> None:
    done = run_python(
        PRELUDE
        + """
resource.setrlimit(resource.RLIMIT_NOFILE, (300, 1500))
from routing.gateway.limits import raise_open_file_limit, upstream_connections
got = raise_open_file_limit(wanted=65536)
print(json.dumps({"after": got.after, "streams": got.streams, "pool": upstream_connections(),
    "now": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["after"] == result["now"] == 1500
    assert result["streams"] == (1500 - 256) // 2
    assert result["pool"] == 622  # (1500 - 256) // 2 streams, each with one upstream connection
    warning = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert warning and "open-file limit 1500 (the hard limit" in warning[0]
    assert "about 622 concurrent streams" in warning[0]


def test_the_gateway_application_raises_the_limit_when_a_server_loads_it(tmp_path: Path) -> None:
    done = run_python(
        PRELUDE
        + """
resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
import router_project.asgi
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    expected = 65536 if HARD == resource.RLIM_INFINITY else min(65536, HARD)
    assert int(done.stdout.strip().splitlines()[-1]) == expected


def test_the_gateway_application_keeps_its_start_out_of_garbage_collection(
    tmp_path: Path,
) -> None:
    """Bench scenario h: with the collector's defaults, objects that wait one chunk gap
    were promoted and died old, and full collections over 5,000 streams took 47 % of the
    process in pauses of up to 1.4 s. The server's application freezes what start made and
    collects the young every YOUNG_COLLECTION_EVERY allocations."""
    done = run_python(
        PRELUDE
        + """
import gc
assert gc.get_freeze_count() == 0 and gc.get_threshold()[0] == 700
import router_project.asgi
print(gc.get_threshold()[0], gc.get_freeze_count())
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    from routing.gateway.limits import YOUNG_COLLECTION_EVERY

    young, frozen = map(int, done.stdout.split())
    assert young == YOUNG_COLLECTION_EVERY
    assert frozen > 100_000  # Django and the whole application, as the start imported them
    assert f"objects frozen at start, young every {YOUNG_COLLECTION_EVERY}" in done.stderr


def test_upstream_pool_follows_the_setting_then_the_open_file_limit() -> None:
    from routing.gateway.limits import upstream_connections

    assert upstream_connections(3000) == 3000
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert upstream_connections(0) == max(512, (soft - 256) // 2)


def test_a_providers_client_gets_a_pool_for_every_stream_the_process_can_hold(
    settings: object,
) -> None:
    from routing.gateway.runtime import Runtime
    from routing.gateway.table import ProviderSpec
    from routing.state.memory import MemoryStore
    from routing.upstream.openai import Timeouts

    settings.SWITCHYARD = {**settings.SWITCHYARD, "UPSTREAM_MAX_CONNECTIONS": 4321}  # type: ignore[attr-defined]
    runtime = Runtime(store=MemoryStore())
    provider = ProviderSpec(
        name="p",
        kind="openai",
        base_url="http://127.0.0.1:9/v1",
        api_key="",
        headers={},
        timeouts=Timeouts(),
        version=1,
    )
    client = runtime.client_for(provider)
    assert client.max_connections == 4321
