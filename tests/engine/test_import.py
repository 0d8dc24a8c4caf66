"""The engine imports with Django unconfigured and pulls in neither Django nor httpx."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import routing.engine
print(json.dumps({
    "django": sorted(m for m in sys.modules if m == "django" or m.startswith("django.")),
    "httpx": sorted(m for m in sys.modules if m == "httpx" or m.startswith("httpx.")),
    "exported": sorted(routing.engine.__all__),
}))
"""


def test_engine_imports_without_django_or_httpx() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["django"] == []
    assert report["httpx"] == []
    assert {"decide", "record_failure", "get_algorithm", "classify_http"} <= set(report["exported"])


def test_all_names_exist() -> None:
    import routing.engine as engine

    missing = [name for name in engine.__all__ if not hasattr(engine, name)]
    assert missing == []
