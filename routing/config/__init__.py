"""Configuration: one schema, layered policy, the config file, and its errors.

::

    routing/config/
    ├── errors.py   ConfigError / FieldError (dotted paths, every error at once); NotFound
    ├── fields.py   Policy: the metadata each policy field is declared with (once)
    ├── schema.py   pydantic models shared by file, API, page and admin; RENAMED_KEYS;
    │               PolicyIn, where every policy field is declared
    ├── policy.py   POLICY_FIELDS, BUILTIN_DEFAULTS (derived), flatten/unflatten, resolve()
    ├── yaml.py     load_file / load_text: parse, interpolate, validate (no database)
    └── export.py   export_config: the configuration as a file (needs the app registry)

Only the pure parts are re-exported here so importing ``routing.config`` never touches
the ORM; import ``routing.config.yaml`` / ``routing.config.export``
explicitly. Writing the file is a service (``routing.services.config_file``).
"""

from routing.config.errors import ConfigError, FieldError
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    POLICY_FIELDS,
    ResolvedField,
    flatten,
    resolve,
    unflatten,
    validate_effective,
    validate_policy_flat,
)

__all__ = [
    "BUILTIN_DEFAULTS",
    "POLICY_FIELDS",
    "ConfigError",
    "FieldError",
    "ResolvedField",
    "flatten",
    "resolve",
    "unflatten",
    "validate_effective",
    "validate_policy_flat",
]
