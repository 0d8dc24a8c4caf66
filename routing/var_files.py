"""Files under the var dir are the owner's alone (SPEC §9): the directory 0700, each file
0600.

The var dir holds the embedded database, the generated secrets and the demo key, so
anyone else on the machine who can read it reads every provider credential's key and
every recorded call. Decisions:

- The directory is created 0700, and an existing one is narrowed to 0700 (an install
  made before this rule is fixed at its next start).
- The SQLite file is narrowed to 0600 as each connection opens (``routing.apps``), not at
  settings import, so a command refused before it touches the database writes no file:
  SQLite gives its ``-wal`` and ``-shm`` files the database file's own mode, so those
  made later are owner-only too, and any made before are narrowed with it. The file is
  0644 only between SQLite creating it and the first connection's signal, inside the
  0700 var dir that no one else can enter.
- A generated secret is written to a temporary file, then linked to its name: the link
  fails if the name exists, so processes started at once (daphne workers, pytest-xdist)
  agree on one secret and none ever reads a half-written file.

Nothing here imports Django: ``router_project.settings`` calls it before Django is set up.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def owner_only_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if missing; the directory itself ends up 0700."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if (path.stat().st_mode & 0o777) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def owner_only_sqlite(path: Path) -> None:
    """Create the database file empty and 0600 if missing (SQLite then gives its WAL and
    shared-memory files the same mode), or narrow an existing one and its companions."""
    with contextlib.suppress(FileExistsError, FileNotFoundError):  # no folder: SQLite says so
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    for file in (path, *(path.with_name(path.name + suffix) for suffix in SQLITE_COMPANIONS)):
        with contextlib.suppress(FileNotFoundError):
            if (file.stat().st_mode & 0o777) != FILE_MODE:
                os.chmod(file, FILE_MODE)


class EmptySecretFile(Exception):
    """A secret file exists but holds nothing (restore it, or set the variable)."""


def read_or_create_secret(path: Path) -> tuple[str, bool]:
    """The secret kept in ``path``, generated (0600) when the file is missing; and whether
    this call generated it. Raises :class:`EmptySecretFile` for an empty file."""
    owner_only_dir(path.parent)
    if not path.exists():
        generated = secrets.token_urlsafe(48)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(generated + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:  # another process published its secret first: use that
            pass
        else:
            return generated, True
        finally:
            os.unlink(temporary)
    secret = path.read_text(encoding="utf-8").strip()
    if not secret:
        raise EmptySecretFile(str(path))
    return secret, False
