"""Persistent configuration: providers, groups and their targets, global settings, keys.

The gateway never reads these tables on the hot path: ``routing`` compiles them into an
in-memory routing table. Saving or deleting a row of these models is a configuration
write: its hooks (``routing.signals``) bump ``ConfigVersion`` once per transaction and,
after commit, mark the table stale in every process, which compiles it again on its next
call.

Policy is stored as *flat dotted keys* (``{"retry.max_retries": 3}``), one JSON object
per layer: ``GlobalSettings.file_policy`` (the config file's ``defaults:``),
``GlobalSettings.policy`` (global settings written by the API/page) and ``Group.policy``
(per-group overrides). A missing key means "inherit the lower layer"; see
``routing.config.policy.resolve``. Every writer validates through ``routing.config``.

``version`` on Provider, Group and GlobalSettings is the optimistic-concurrency token:
every write that changes the row bumps it, and a write based on an older version is
refused by the API/page/admin. ``file_version`` on Provider and Group is the ``version`` the
config file last left the row at (null: never written by the file); ``version !=
file_version`` means the page, API or admin changed it since, which a file load must not
undo silently (``routing.services.config_file``). ``ConfigVersion`` counts every committed
configuration write, so gateway processes without Redis notice changes (``routing.gateway.sync``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.utils.deconstruct import deconstructible

from routing import crypto
from routing.config.schema import GROUP_NAME_RE, TIMEOUT_DEFAULTS
from routing.engine.targets import target_key
from routing.platforms.base import PlatformSettings
from routing.protocols.registry import KIND_CHOICES

HINT_MIN_KEY_LENGTH = 12  # shorter credentials get no hint: 4 chars would be too much of them


@deconstructible
class GroupNameValidator(RegexValidator):
    """What clients put in ``model``: letters, digits, dots, dashes, underscores."""

    regex = GROUP_NAME_RE
    message = (
        "Use 1-100 letters, digits, dots, dashes or underscores, starting with a letter or digit."
    )


# A CharField with Django's URLValidator (which accepts localhost and IP literals, as
# local upstreams need); the config schema applies the same validator.
base_url_validator = URLValidator(schemes=["http", "https"])


class Provider(models.Model):
    """One upstream endpoint and its (encrypted) credential."""

    KIND_CHOICES: ClassVar[list[tuple[str, str]]] = KIND_CHOICES  # routing.protocols.registry

    name = models.SlugField(unique=True)
    kind = models.CharField(max_length=20, choices=KIND_CHOICES, default="openai")
    # Where and how the kind is reached (SPEC §19); its fields below are read by the
    # platforms that need them (routing.platforms). Empty base_url: the platform's own
    # endpoint (built from region/project), where it has one. No model choices: the
    # registry's PLATFORMS are checked by the schema every write goes through, and the
    # admin's form offers them, so a new platform needs no migration.
    platform = models.CharField(max_length=20, default="direct")
    base_url = models.CharField(max_length=500, blank=True, validators=[base_url_validator])
    region = models.CharField(max_length=64, blank=True, default="")
    project = models.CharField(max_length=128, blank=True, default="")
    credentials_file = models.CharField(max_length=500, blank=True, default="")
    entra = models.BooleanField(default=False)
    # The platform's secrets (aws_access_key_id, aws_secret_access_key, aws_session_token):
    # {name: Fernet token}, write-only like api_key (get/set_platform_secrets).
    platform_secrets_encrypted = models.JSONField(default=dict, blank=True, editable=False)
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    api_key_hint = models.CharField(max_length=12, blank=True, default="", editable=False)
    # Extra request headers, {name: Fernet token of the value}: values often carry
    # credentials, so they are write-only and encrypted like api_key (get/set_headers).
    headers_encrypted = models.JSONField(default=dict, blank=True, editable=False)
    # Which anthropic-beta values reach this provider: {"allow": [...], "strip": [...]};
    # {} passes every beta the client sent (routing.protocols.betas).
    betas = models.JSONField(default=dict, blank=True)
    models_loaded_at = models.DateTimeField(null=True, blank=True)
    connect_timeout_s = models.FloatField(default=TIMEOUT_DEFAULTS["connect_s"])
    headers_timeout_s = models.FloatField(default=TIMEOUT_DEFAULTS["headers_s"])
    first_token_timeout_s = models.FloatField(default=TIMEOUT_DEFAULTS["first_token_s"])
    idle_timeout_s = models.FloatField(default=TIMEOUT_DEFAULTS["idle_s"])
    total_timeout_s = models.FloatField(default=TIMEOUT_DEFAULTS["total_s"])
    # Seconds between active health checks of this provider's cooling targets; 0 = off,
    # null = the gateway's SWITCHYARD_HEALTH_CHECK_S (routing.gateway.checker).
    health_check_s = models.FloatField(
        null=True,
        blank=True,
        help_text="Active health check interval of cooling targets, in seconds; 0 turns "
        "checks off; empty = the gateway default (SWITCHYARD_HEALTH_CHECK_S, 10 s).",
    )
    version = models.PositiveIntegerField(default=1)
    file_version = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Last on purpose: this field shadows the ``models`` module for the rest of the body.
    models = models.JSONField(default=list, blank=True)  # model ids this provider serves

    class Meta:
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def set_api_key(self, plain: str) -> None:
        """Encrypt and store ``plain`` (surrounding whitespace dropped); ``""`` clears it.

        Does not save. The hint keeps at most the last 4 characters, and none at all for
        keys shorter than 12 characters.
        """
        plain = plain.strip()
        if not plain:
            self.api_key_encrypted = ""
            self.api_key_hint = ""
            return
        self.api_key_encrypted = crypto.encrypt(plain)
        self.api_key_hint = "…" + plain[-4:] if len(plain) >= HINT_MIN_KEY_LENGTH else "…"

    def get_api_key(self) -> str:
        """The plaintext credential, or ``""`` when none is set.

        Raises ``routing.crypto.CredentialDecryptError`` if the secret changed.
        """
        if not self.api_key_encrypted:
            return ""
        return crypto.decrypt(self.api_key_encrypted)

    @property
    def header_names(self) -> list[str]:
        """The extra headers' names (their values are write-only)."""
        return list(self.headers_encrypted or {})

    def get_headers(self) -> dict[str, str]:
        """The extra headers in plaintext. Raises ``CredentialDecryptError`` like
        :meth:`get_api_key`."""
        return {
            name: crypto.decrypt(token) for name, token in (self.headers_encrypted or {}).items()
        }

    def set_headers(self, headers: dict[str, str]) -> None:
        """Encrypt and store ``headers`` (does not save). A value that did not change keeps
        its token, so an unchanged provider compares equal to its stored row."""
        stored = dict(self.headers_encrypted or {})
        tokens: dict[str, str] = {}
        for name, value in headers.items():
            token = stored.get(name)
            try:
                same = token is not None and crypto.decrypt(token) == value
            except crypto.CredentialDecryptError:
                same = False
            tokens[name] = token if same and token is not None else crypto.encrypt(value)
        self.headers_encrypted = tokens

    @property
    def platform_secret_names(self) -> list[str]:
        """The platform secrets that are set (their values are write-only)."""
        return sorted(self.platform_secrets_encrypted or {})

    def get_platform_secrets(self) -> dict[str, str]:
        """The platform secrets in plaintext. Raises ``CredentialDecryptError`` like
        :meth:`get_api_key`."""
        return {
            name: crypto.decrypt(token)
            for name, token in (self.platform_secrets_encrypted or {}).items()
        }

    def set_platform_secret(self, name: str, plain: str) -> None:
        """Encrypt and store one platform secret (``""`` clears it). Does not save."""
        stored = dict(self.platform_secrets_encrypted or {})
        plain = plain.strip()
        if plain:
            stored[name] = crypto.encrypt(plain)
        else:
            stored.pop(name, None)
        self.platform_secrets_encrypted = stored

    def platform_settings(self) -> PlatformSettings:
        """The platform fields as the platforms read them, secrets decrypted (raises
        ``CredentialDecryptError`` when one cannot be)."""
        return PlatformSettings(
            region=self.region,
            project=self.project,
            credentials_file=self.credentials_file,
            entra=self.entra,
            **self.get_platform_secrets(),
        )


class Group(models.Model):
    """A virtual model clients address by name; its targets are ordered by position."""

    name = models.CharField(max_length=100, unique=True, validators=[GroupNameValidator()])
    # Model-name globs that also reach this group (routing.config.aliases).
    aliases = models.JSONField(default=list, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=1)
    file_version = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return self.name


class Target(models.Model):
    """One ``(provider, model)`` route inside a group."""

    group = models.ForeignKey(Group, related_name="targets", on_delete=models.CASCADE)
    provider = models.ForeignKey(Provider, related_name="targets", on_delete=models.PROTECT)
    model = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)
    weight = models.PositiveIntegerField(default=1)
    enabled = models.BooleanField(default=True)
    context_window = models.PositiveIntegerField(null=True, blank=True)
    # keep_thinking, break_tool_loop, reasoning_effort, efforts, circuit (SPEC §4, §13):
    # written only through routing.config.schema.target_options, so every path agrees.
    options = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["group", "position"]
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(
                fields=["group", "provider", "model"], name="routing_target_unique_route"
            )
        ]

    def __str__(self) -> str:
        return target_key(self.provider.name, self.model)


class GlobalSettings(models.Model):
    """Singleton (pk=1) holding the two lower policy layers and where the file came from."""

    file_policy = models.JSONField(default=dict, blank=True)
    policy = models.JSONField(default=dict, blank=True)
    config_source = models.CharField(max_length=500, blank=True, default="")
    version = models.PositiveIntegerField(default=1)

    class Meta:
        verbose_name = "global settings"
        verbose_name_plural = "global settings"

    def __str__(self) -> str:
        return "Global settings"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> GlobalSettings:
        obj, _ = cls.objects.get_or_create(pk=1)
        return obj


class ApiKey(models.Model):
    """A gateway key. Only the sha256 of the secret is stored; ``prefix`` identifies it."""

    KIND_CHOICES: ClassVar[list[tuple[str, str]]] = [("client", "client"), ("admin", "admin")]

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=KIND_CHOICES, default="client")
    prefix = models.CharField(max_length=16, db_index=True)
    hashed = models.CharField(max_length=64, unique=True)
    groups = models.JSONField(default=list, blank=True)
    # rpm, tpm, concurrency, tokens/cost per day/month (SPEC §17): written only through
    # routing.services.api_keys, validated by routing.config.schema.LimitsIn.
    limits = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ConfigVersion(models.Model):
    """Singleton (pk=1): bumped inside every transaction that writes configuration.

    Gateway processes poll it off the request path (``routing.gateway.sync.VersionWatcher``) and
    recompile when it moves: the database itself is the notice, with or without Redis.
    """

    version = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "configuration version"

    def __str__(self) -> str:
        return f"configuration version {self.version}"
