"""Configuration writes and operator actions: what the management API and the settings
page do, in one place (keyword-only arguments, ``<thing>_<verb>`` names). Reads live in
``routing.selectors``.

::

    routing/services/
    ├── base.py           errors, compare-and-set on versions, change records
    ├── providers.py      provider_create / _update / _delete, providers_rotate_secret
    ├── upstream.py       provider_refresh_models, provider_test (the kind's own client)
    ├── health.py         provider_enable, target_reset (the async health store)
    ├── groups.py         group_create / _update_policy / _restore_default / _delete
    ├── targets.py        target_add / _remove / _update / _set_enabled, targets_reorder
    ├── global_policy.py  global_update_policy / global_set_policy / global_restore_default
    ├── config_file.py    config_apply: the config file's apply and prune (``loadconfig``)
    └── api_keys.py       key_create / key_revoke / key_update / key_rename / key_delete

Exception tree (the API turns each into one response, ``routing.api.config_api``;
``ServiceError`` and ``NotFound`` are declared in ``routing.config.errors``, since the
selectors raise ``NotFound`` too and import nothing from here)::

    ServiceError
    ├── NotFound           the named provider / group / target / key does not exist  (404)
    ├── VersionConflict    ``based_on`` is not the current version; ``current_version`` (412)
    └── ProviderCallError  the upstream could not give a model list (credential scrubbed) (424)
    routing.config.errors.ConfigError   invalid input, one FieldError per problem        (422)
    ├── NameTaken      the object to create already exists                            (409)
    └── Clash          valid, but clashes with another object (overlapping aliases)    (409)

Decisions:

- **Compare-and-set on the version.** A write first runs
  ``UPDATE … SET version = version + 1 WHERE pk = … AND version = based_on`` inside its
  transaction; if no row matched, the write is stale and nothing else happens. Two writers
  based on the same version can never both win: the database serialises the two updates
  (a row lock on PostgreSQL, the IMMEDIATE write lock on SQLite) and the second matches
  nothing. Order of refusals: unknown object, then stale version, then invalid content
  (a stale write is refused before its content is looked at). Any refusal rolls the whole
  write back, version bump included.
- **Versions move only on real change.** A write that changes nothing (same policy, same
  fields) is checked against ``based_on`` but does not bump the version, record a change or
  rebuild the routing table, so open settings pages are not pushed into a conflict.
- **Target writes bump the group's version**: a target is part of its group's state, and
  ``based_on`` for them is the group version.
- **Names are immutable**; renaming is "create the new one, delete the old one".
- **One schema**: every input goes through ``routing.config.schema``: providers, groups
  and targets through ``parse_provider`` / ``parse_group`` / ``parse_target``; policy
  changes (flat dotted keys, nested blocks, or both) through ``PolicyIn`` on their nested
  form, which is what the config file's blocks go through, so messages match the file's
  (renamed keys included). Then the layered ``validate_effective``. A global-policy write
  is also checked against every group's overrides, so it can never leave a group with an
  invalid effective policy.
- **Model-list honesty**: a target's model must be in its provider's model list when that
  list is non-empty (declared or refreshed); a provider with an empty list accepts any
  model, so a script can configure an upstream that has no ``/models`` endpoint. (The
  config file does not apply this rule yet: its ``models`` may be declared in the same
  file, so the loader would need it as a cross-check.)
- **Credentials**: ``api_key`` absent or ``""`` keeps the stored credential, a non-empty
  string replaces it, ``null`` clears it. A replaced credential re-enables the provider in
  the health store (SPEC §4: a disabled provider leaves that state by an operator action or
  a changed credential). Credentials never enter a record, an error or a return value.
- **Every change** is recorded with ``routing.audit.services.config_change_record``
  (``base.record``). The rows a write saves or deletes bump the configuration version once
  and invalidate the routing table in every process once, after commit
  (``routing.signals``: the model hooks, the one trigger), so the next call follows the
  change. A service that touches a row without changing the configuration
  (``models_loaded_at``, a re-encrypted credential) does it with ``update()``, which
  triggers nothing.
- All functions are sync (Django ORM). Health actions drive the async health store through
  ``async_to_sync``; call them from a worker thread (a sync view, ``sync_to_async``),
  never from inside an event loop.
"""

from routing.config.errors import NotFound, ServiceError
from routing.services.api_keys import (
    key_create,
    key_delete,
    key_rename,
    key_revoke,
    key_update,
)
from routing.services.base import (
    Clash,
    NameTaken,
    ProviderCallError,
    VersionConflict,
)
from routing.services.global_policy import (
    global_restore_default,
    global_set_policy,
    global_update_policy,
)
from routing.services.groups import (
    group_create,
    group_delete,
    group_restore_default,
    group_set_aliases,
    group_update_policy,
)
from routing.services.health import provider_enable, target_reset
from routing.services.providers import (
    provider_create,
    provider_delete,
    provider_update,
    providers_rotate_secret,
)
from routing.services.targets import (
    target_add,
    target_remove,
    target_set_enabled,
    target_update,
    targets_reorder,
)
from routing.services.upstream import ProviderTestResult, provider_refresh_models, provider_test

__all__ = [
    "Clash",
    "NameTaken",
    "NotFound",
    "ProviderCallError",
    "ProviderTestResult",
    "ServiceError",
    "VersionConflict",
    "global_restore_default",
    "global_set_policy",
    "global_update_policy",
    "group_create",
    "group_delete",
    "group_restore_default",
    "group_set_aliases",
    "group_update_policy",
    "key_create",
    "key_delete",
    "key_rename",
    "key_revoke",
    "key_update",
    "provider_create",
    "provider_delete",
    "provider_enable",
    "provider_refresh_models",
    "provider_test",
    "provider_update",
    "providers_rotate_secret",
    "target_add",
    "target_remove",
    "target_reset",
    "target_set_enabled",
    "target_update",
    "targets_reorder",
]
