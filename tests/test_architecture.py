"""The architecture as import contracts (pyproject.toml ``[tool.importlinter]``): the
engine imports only the standard library; only ``routing.upstream`` imports HTTP client
libraries; the gateway never imports the dashboard; the management API and the dashboard
do not import each other; ``routing.config`` (parsing, export) never imports the services
that write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "5 kept, 0 broken" in done.stdout
