"""The demo's client key and the welcome ``manage.py serve`` prints.

Decisions (issue 37 item 4):

- **Only for the demo, and only once.** The key named ``demo`` is created by the first
  start that serves the demo configuration (``SWITCHYARD_CONFIG`` unset) and never again:
  once any key of that name exists, a start creates none, so a revoked demo key stays
  revoked (SPEC §10: a start never undoes operator work). A production start (a config
  file) creates no key at all; its operator makes keys with ``createkey``.
- **The secret is never printed.** Standard output ends up in logs, so the secret is
  written only to ``var/demo-key`` (mode 0600) and the welcome names that file; its
  examples read the key from it (``$(cat …)``).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

DEMO_KEY_NAME = "demo"
DEMO_KEY_FILE = "demo-key"


@dataclass(frozen=True, slots=True)
class DemoKey:
    """Where the demo key is kept, and whether that file holds an active key."""

    path: Path
    usable: bool
    created: bool = False


def demo_key(var_dir: Path) -> DemoKey:
    """The demo client key: created (and written to ``var_dir/demo-key``, 0600) when no
    key named ``demo`` was ever made; otherwise the kept one, usable while not revoked.
    Never revokes and never re-creates anything."""
    from routing.models import ApiKey
    from routing.services import key_create
    from routing.services.api_keys import hash_secret
    from routing.services.base import default_actor

    path = var_dir / DEMO_KEY_FILE
    if ApiKey.objects.filter(name=DEMO_KEY_NAME).exists():
        try:
            kept = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeError):
            kept = ""
        active = ApiKey.objects.filter(hashed=hash_secret(kept), revoked_at__isnull=True)
        return DemoKey(path=path, usable=bool(kept) and active.exists())
    _, secret = key_create(name=DEMO_KEY_NAME, kind="client", actor=default_actor(), path="cli")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)  # an existing file keeps its mode on O_CREAT
    return DemoKey(path=path, usable=True, created=True)


def welcome(host: str, port: int, key: DemoKey | None, *, demo: bool) -> str:
    """What a start prints: where it serves, where the client key is (never the key),
    and a curl and a Python example that read it from there."""
    base = f"http://{host}:{port}/v1"
    lines = [
        "",
        f"Switchyard is starting on http://{host}:{port}  (settings page: http://{host}:{port}/ , admin: /admin/)",
    ]
    if key is not None and key.usable:
        quoted = shlex.quote(str(key.path))
        shell_key, python_key, imports = (
            f"$(cat {quoted})",
            f"open({str(key.path)!r}).read().strip()",
            [],
        )
        lines.append(
            f"Client key 'demo': in {key.path} (mode 0600; the secret is never printed). "
            f"Use it with: KEY=$(cat {quoted})"
        )
    else:
        shell_key, python_key, imports = "$KEY", "os.environ['KEY']", ["  import os"]
        if key is not None:
            lines.append(
                f"Client key: the demo key in {key.path} was revoked; a start never re-creates it."
            )
        lines.append(
            "Create a client key with: .venv/bin/python manage.py createkey NAME "
            "(it prints the secret once), then: export KEY=<that secret>"
        )
    lines += [
        "",
        "Try it:",
        f'  curl -sS {base}/chat/completions -H "Authorization: Bearer {shell_key}" '
        f'-H \'Content-Type: application/json\' -d \'{{"model": "auto", "messages": '
        f'[{{"role": "user", "content": "Hello"}}]}}\' -D -',
        "",
        "  .venv/bin/pip install -q openai   # once: the SDK is a client tool, not a gateway dependency",
        "  .venv/bin/python - <<'PY'",
        *imports,
        "  from openai import OpenAI",
        f"  client = OpenAI(base_url='{base}', api_key={python_key})",
        "  reply = client.chat.completions.create(model='auto', messages=[{'role': 'user', 'content': 'Hello'}])",
        "  print(reply.model, reply.choices[0].message.content)",
        "  PY",
        "",
    ]
    if demo:
        lines.insert(
            -1,
            "The demo's 'auto' group starts on a flaky route: watch the x-switchyard-trail header "
            "show retries and failovers. Set SWITCHYARD_CONFIG=your.yaml to serve your own routes.",
        )
    return "\n".join(lines)
