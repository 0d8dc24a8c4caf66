"""The config file's text (SPEC §11): parse, interpolate and validate it.

Decisions:

- ``${VAR}`` and ``${VAR:-default}`` are interpolated in string values (the default
  applies when the variable is unset or empty); ``$${`` writes a literal ``${``.
  Duplicate mapping keys are errors (YAML would silently keep the last one).
- A credential (``api_key``, a platform secret) written as one ``${VAR}`` whose variable
  is unset is dropped from the document (absent = keep the stored credential); an
  ``api_key`` so dropped is listed in ``unset_credentials``;
  the apply (``routing.services.config_apply``) checks there is a stored one to keep.
  A header value written so becomes ``""``, which keeps the stored value the same way.
- Schema errors and missing environment variables are collected and raised together as
  one ConfigError. Nothing here touches the database: writing is the services' job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from routing.config.errors import ConfigError, FieldError
from routing.config.schema import ConfigFileIn, parse_config

_ENV_REF = re.compile(r"\$(\$)?\{([^}]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of keeping the last one."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[FieldError] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    line = key_node.start_mark.line + 1
                    self.duplicates.append(
                        FieldError("", f"line {line}: duplicate key {key_node.value!r}")
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """Parse YAML safely; syntax errors name line and column but never quote the text."""
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({exc.context})" if exc.context else ""
        raise ConfigError.single("", f"YAML syntax error{where}: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError.single("", f"YAML error: {type(exc).__name__}") from None
    finally:
        loader.dispose()
    if loader.duplicates:
        raise ConfigError(loader.duplicates)
    return data


def _interpolate_text(text: str, env: Mapping[str, str], path: str) -> tuple[str, list[FieldError]]:
    errors: list[FieldError] = []

    def substitute(match: re.Match[str]) -> str:
        escaped, body = match.group(1), match.group(2)
        if escaped:
            return "${" + body + "}"
        name, has_default, default = body.partition(":-")
        if not _ENV_NAME.match(name):
            errors.append(
                FieldError(
                    path, f"invalid reference ${{{body}}}: write ${{NAME}} or ${{NAME:-default}}"
                )
            )
            return match.group(0)
        value = env.get(name)
        if not value and has_default:
            return default
        if value is None:
            errors.append(FieldError(path, f"environment variable {name} is not set"))
            return match.group(0)
        return value

    return _ENV_REF.sub(substitute, text), errors


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> tuple[Any, list[FieldError]]:
    """Replace ``${VAR}`` references in every string value (not keys) of a document."""
    if isinstance(value, str):
        return _interpolate_text(value, env, path)
    errors: list[FieldError] = []
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], found = interpolate(item, env, f"{path}.{key}" if path else str(key))
            errors += found
        return out, errors
    if isinstance(value, list):
        items: list[Any] = []
        for index, item in enumerate(value):
            new, found = interpolate(item, env, f"{path}.{index}" if path else str(index))
            items.append(new)
            errors += found
        return items, errors
    return value, errors


_CREDENTIAL_PATH = re.compile(
    r"^providers\.(\d+)\.(api_key|aws_access_key_id|aws_secret_access_key|aws_session_token)$"
)
_HEADER_PATH = re.compile(r"^providers\.(\d+)\.headers\.(.+)$")
_WHOLE_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def _unset_credentials(
    raw: Any, interpolated: Any, env_errors: list[FieldError], env: Mapping[str, str]
) -> tuple[dict[str, str], list[FieldError]]:
    """Credentials written as one ``${VAR}`` whose variable is unset: dropped from the
    document (absent = keep the stored credential) and returned as ``{provider: VAR}``;
    the apply checks that there is a stored credential to keep."""
    kept: dict[str, str] = {}
    remaining: list[FieldError] = []
    for error in env_errors:
        if _unset_header(raw, interpolated, error, env):
            continue
        match = _CREDENTIAL_PATH.match(error.path)
        provider = interpolated["providers"][int(match.group(1))] if match else None
        field = match.group(2) if match else "api_key"
        written = raw["providers"][int(match.group(1))].get(field) if match else None
        whole = _WHOLE_REF.match(written) if isinstance(written, str) else None
        name = provider.get("name") if isinstance(provider, dict) else None
        if (
            whole
            and isinstance(provider, dict)
            and isinstance(name, str)
            and whole.group(1) not in env
        ):
            provider.pop(field, None)
            if field == "api_key":  # a platform secret left out falls back on its chain
                kept[name] = whole.group(1)
        else:
            remaining.append(error)
    return kept, remaining


def _unset_header(raw: Any, interpolated: Any, error: FieldError, env: Mapping[str, str]) -> bool:
    """A header value written as one ``${VAR}`` whose variable is unset becomes ``""``: keep
    the stored value (the apply refuses it when there is none to keep, naming the header)."""
    match = _HEADER_PATH.match(error.path)
    if match is None:
        return False
    index, header = int(match.group(1)), match.group(2)
    written = raw["providers"][index].get("headers", {}).get(header)
    whole = _WHOLE_REF.match(written) if isinstance(written, str) else None
    if whole is None or whole.group(1) in env:
        return False
    interpolated["providers"][index]["headers"][header] = ""
    return True


def load_text(text: str, *, env: Mapping[str, str] | None = None) -> ConfigFileIn:
    """Parse, interpolate and validate a config document; ConfigError lists every error."""
    raw = parse_yaml(text)
    if raw is None:
        raise ConfigError.single("", "the config file is empty")
    env = os.environ if env is None else env
    interpolated, env_errors = interpolate(raw, env)
    kept, env_errors = _unset_credentials(raw, interpolated, env_errors, env)
    try:
        config = parse_config(interpolated)
    except ConfigError as exc:
        # A value still holding an unresolved ${VAR} fails the schema too; say it once.
        bad = {error.path for error in env_errors}
        schema_errors = [e for e in exc.errors if e.path not in bad]
        raise ConfigError(env_errors + schema_errors) from None
    if env_errors:
        raise ConfigError(env_errors)
    config.unset_credentials = kept
    return config


def load_file(
    path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None
) -> ConfigFileIn:
    """Read and validate a config file (see :func:`load_text`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        raise ConfigError.single(
            "", f"cannot read {os.fspath(path)}: {exc.__class__.__name__}"
        ) from None
    return load_text(text, env=env)
