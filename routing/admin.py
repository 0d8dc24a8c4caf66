"""Django admin for providers, groups (with targets), global settings and API keys.

The admin is one more write path, so it validates through the same schema as the config
file and the API (``routing.config``) and refuses stale writes (a hidden
``based_on_version`` field, compared with the row's ``version``). A provider or the global
settings is saved by the same service as the API's and the page's (``routing.services``:
``versioned_write`` claims the row's version, ``record()`` records the change); a group
and its inline targets are rows the admin's formsets write, recorded by ``record_writes``.
Every delete is the service's (``provider_delete``, ``group_delete``, ``key_delete``), a
bulk delete all of them in one transaction; a key's name, the one field its page edits, is
renamed by ``key_rename``. Whatever rows are saved or deleted bump the
configuration version and announce the change once (``routing.signals``).

Credentials are write-only: the form has an empty password field that sets a new key
when filled; the encrypted column is never a form field and is never displayed — the
page shows only "set (…xYz1)".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from routing.config.errors import ConfigError
from routing.config.policy import (
    BUILTIN_DEFAULTS,
    resolve,
    validate_effective,
    validate_policy_flat,
)
from routing.config.schema import (
    PLATFORM_SECRETS,
    TARGET_OPTIONS,
    parse_provider,
    parse_target,
    target_options,
)
from routing.models import ApiKey, GlobalSettings, Group, Provider, Target
from routing.protocols.registry import PLATFORM_CHOICES
from routing.services import group_delete, key_delete, key_rename, key_revoke, provider_delete
from routing.services.api_keys import NAME_RULE as KEY_NAME_RULE
from routing.services.api_keys import good_key_name
from routing.services.base import record_writes
from routing.services.global_policy import checked_global_policy, global_set_policy
from routing.services.groups import check_listed, group_snapshot, group_targets_edited
from routing.services.providers import new_headers, provider_create, provider_update

if TYPE_CHECKING:
    # Django's admin and form classes are generic only in django-stubs: at run time they
    # take no subscript without django_stubs_ext.monkeypatch(), and that package is dev-only.
    AnyModelAdmin = admin.ModelAdmin[Any]  # the admins below share bases across models
    AnyModelForm = forms.ModelForm[Any]
    TargetForm = forms.ModelForm[Target]
    TargetFormSetBase = BaseInlineFormSet[Target, Group, TargetForm]
    TargetInlineBase = admin.TabularInline[Target, Group]
else:
    AnyModelAdmin, AnyModelForm, TargetForm = admin.ModelAdmin, forms.ModelForm, forms.ModelForm
    TargetFormSetBase, TargetInlineBase = BaseInlineFormSet, admin.TabularInline

# --- shared pieces -------------------------------------------------------------------


def _messages(error: ConfigError) -> list[str]:
    return [str(item) for item in error.errors]


class VersionedForm(AnyModelForm):
    """Refuses to save a row that changed since the form was rendered (SPEC §5)."""

    based_on_version = forms.IntegerField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["based_on_version"].initial = self.instance.version

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean returns; the stubs allow None
        based_on = cleaned.get("based_on_version")
        if self.instance.pk and based_on is not None and based_on != self.instance.version:
            raise ValidationError(
                f"Someone else changed this {self._meta.model._meta.verbose_name} (now version "
                f"{self.instance.version}) after you opened this page. Reload it and reapply "
                "your change.",
                code="conflict",
            )
        return cleaned


def _policy_layers() -> tuple[dict[str, Any], dict[str, Any]]:
    row = GlobalSettings.objects.filter(pk=1).first()
    return (row.file_policy, row.policy) if row else ({}, {})


class ConfigAdmin(AnyModelAdmin):
    """Deletes through the services (path ``admin``), as the API and the page delete: a
    bulk delete is one transaction, so one version bump and one announcement."""

    def _actor(self, request: HttpRequest) -> str:
        return f"admin:{request.user.get_username()}"

    def delete_through_service(self, obj: Any, *, actor: str) -> None:
        raise NotImplementedError

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.delete_through_service(obj, actor=self._actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        actor = self._actor(request)
        with transaction.atomic():
            for obj in queryset:
                self.delete_through_service(obj, actor=actor)


class SavesThroughService(ConfigAdmin):
    """An admin whose save is one service call: the service claims the row's version
    (``based_on_version``), writes it, records the change and announces it once, as it
    does for the API and the page. The admin writes no row of its own; ``obj`` is then
    the row as saved (Django's admin logs and redirects with it)."""

    def save_through_service(
        self, form: Any, *, based_on: int | None, actor: str
    ) -> Provider | GlobalSettings:
        """Save the validated ``form`` through the service; ``based_on`` None: a new row."""
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        based_on = None
        if change:
            given = form.cleaned_data.get("based_on_version")
            based_on = obj.version if given is None else given
        saved = self.save_through_service(form, based_on=based_on, actor=self._actor(request))
        obj.pk = saved.pk
        obj.refresh_from_db()


class RecordsItsRows(ConfigAdmin):
    """An admin whose save writes rows itself (a group and its inline targets): one
    config-change record after the rows (which bump the version and announce it once)."""

    object_type = ""

    def snapshot(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        stored = type(obj).objects.filter(pk=obj.pk).first() if change and obj.pk else None
        request.switchyard_before = self.snapshot(stored) if stored is not None else None  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        before = getattr(request, "switchyard_before", None)
        record_writes(
            actor=self._actor(request),
            path="admin",
            object_type=self.object_type,
            changes=[(str(form.instance.name), before, self.snapshot(form.instance))],
        )


# --- providers -----------------------------------------------------------------------

_PROVIDER_FIELD_FOR = {
    "timeouts.connect_s": "connect_timeout_s",
    "timeouts.headers_s": "headers_timeout_s",
    "timeouts.first_token_s": "first_token_timeout_s",
    "timeouts.idle_s": "idle_timeout_s",
    "timeouts.total_s": "total_timeout_s",
}


_PROVIDER_PLATFORM_FIELDS = ("platform", "region", "project", "credentials_file", "entra")
_PROVIDER_SCHEMA_FIELDS = (
    "name",
    "kind",
    *_PROVIDER_PLATFORM_FIELDS,
    "base_url",
    "headers",
    "betas",
    "models",
    *_PROVIDER_FIELD_FOR.values(),
    "health_check_s",
)


class ProviderAdminForm(VersionedForm):
    api_key = forms.CharField(
        label="API key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored API key", required=False)
    platform = forms.ChoiceField(choices=PLATFORM_CHOICES, initial="direct", required=False)
    aws_access_key_id = forms.CharField(
        label="AWS access key id",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="bedrock: write-only; empty keeps the stored one (none: AWS's own chain).",
    )
    aws_secret_access_key = forms.CharField(
        label="AWS secret access key",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    aws_session_token = forms.CharField(
        label="AWS session token",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_aws_keys = forms.BooleanField(label="Remove the stored AWS keys", required=False)
    headers = forms.JSONField(
        required=False,
        help_text='Extra headers, {"name": "value"}. Values are write-only, like the API key: '
        'stored ones show as "", and "" keeps the stored value.',
    )

    class Meta:
        model = Provider
        fields = [
            "name",
            "kind",
            *_PROVIDER_PLATFORM_FIELDS,
            "base_url",
            "betas",
            "models",
            "connect_timeout_s",
            "headers_timeout_s",
            "first_token_timeout_s",
            "idle_timeout_s",
            "total_timeout_s",
            "health_check_s",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # the names only: a value is never sent to a browser
            self.fields["headers"].initial = {name: "" for name in self.instance.header_names}

    def clean_betas(self) -> dict[str, Any]:
        return self.cleaned_data.get("betas") or {}  # empty: every beta passes

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if any(name not in cleaned for name in _PROVIDER_SCHEMA_FIELDS if name in self.fields):
            return cleaned  # Django already reported a field; the schema check needs them all
        raw = self._fields()
        for secret in ("api_key", *PLATFORM_SECRETS):
            if cleaned.get(secret):  # the schema's credential rule (printable ASCII) applies
                raw[secret] = cleaned[secret]
        try:
            parse_provider(raw)
            new_headers(self.instance, raw["headers"])  # "" keeps a stored value, if any
        except ConfigError as exc:
            for item in exc.errors:
                top = item.path.split(".")[0]
                field = _PROVIDER_FIELD_FOR.get(item.path, top if top in raw else None)
                self.add_error(field, item.message if field else str(item))
        return cleaned

    def _fields(self) -> dict[str, Any]:
        """The form in ``ProviderIn``'s shape, without the credential."""
        cleaned = self.cleaned_data
        return {
            "name": cleaned.get("name") or self.instance.name,  # read-only once created
            "kind": cleaned["kind"],
            "platform": cleaned["platform"] or "direct",
            **{name: cleaned[name] or None for name in ("region", "project", "credentials_file")},
            "entra": cleaned["entra"],
            "base_url": cleaned["base_url"],
            "headers": cleaned["headers"] or {},
            "betas": cleaned["betas"] or None,
            "models": cleaned["models"] or [],
            "timeouts": {
                key.removeprefix("timeouts."): cleaned[column]
                for key, column in _PROVIDER_FIELD_FOR.items()
            },
            "health_check_s": cleaned["health_check_s"],
        }

    def provider_data(self) -> dict[str, Any]:
        """What the provider services take: the fields, and the credential by the shared
        rule (``new_credential``): "remove" clears it (``null``), a new key replaces it,
        neither keeps it (absent)."""
        data = self._fields()
        if self.cleaned_data.get("clear_api_key"):
            data["api_key"] = None
        elif self.cleaned_data.get("api_key"):
            data["api_key"] = self.cleaned_data["api_key"]
        for secret in PLATFORM_SECRETS:
            if self.cleaned_data.get("clear_aws_keys"):
                data[secret] = None
            elif self.cleaned_data.get(secret):
                data[secret] = self.cleaned_data[secret]
        return data


@admin.register(Provider)
class ProviderAdmin(SavesThroughService):
    form = ProviderAdminForm

    list_display = ("name", "kind", "platform", "base_url", "credential", "version")
    search_fields = ("name", "base_url")
    readonly_fields = (
        "credential",
        "aws_keys",
        "models_loaded_at",
        "version",
        "created_at",
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("name", "kind", "base_url", "based_on_version")}),
        ("Credential", {"fields": ("credential", "api_key", "clear_api_key")}),
        (
            "Platform (SPEC §19)",
            {
                "fields": (
                    "platform",
                    "region",
                    "project",
                    "credentials_file",
                    "aws_keys",
                    "aws_access_key_id",
                    "aws_secret_access_key",
                    "aws_session_token",
                    "clear_aws_keys",
                    "entra",
                )
            },
        ),
        ("Upstream", {"fields": ("headers", "betas", "models", "models_loaded_at")}),
        (
            "Timeouts (seconds)",
            {
                "fields": (
                    "connect_timeout_s",
                    "headers_timeout_s",
                    "first_token_timeout_s",
                    "idle_timeout_s",
                    "total_timeout_s",
                )
            },
        ),
        ("Health checks", {"fields": ("health_check_s",)}),
        ("Record", {"fields": ("version", "created_at", "updated_at")}),
    )

    @admin.display(description="credential")
    def credential(self, obj: Provider) -> str:
        return f"set ({obj.api_key_hint})" if obj.has_api_key else "not set"

    @admin.display(description="AWS keys")
    def aws_keys(self, obj: Provider) -> str:
        return (
            ", ".join(obj.platform_secret_names) + " set" if obj.platform_secret_names else "none"
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A provider is never renamed (targets name it): create a new one instead.
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "name") if obj is not None else fields

    def save_through_service(self, form: Any, *, based_on: int | None, actor: str) -> Provider:
        data = form.provider_data()
        if based_on is None:
            return provider_create(data=data, actor=actor, path="admin")
        name = form.instance.name
        return provider_update(name=name, data=data, based_on=based_on, actor=actor, path="admin")

    def delete_through_service(self, obj: Any, *, actor: str) -> None:
        provider_delete(name=obj.name, based_on=obj.version, actor=actor, path="admin")


# --- groups and targets --------------------------------------------------------------


class TargetInlineForm(TargetForm):
    class Meta:
        model = Target
        fields = ["provider", "model", "position", "weight", "enabled", "context_window", "options"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data  # what ModelForm.clean returns; the stubs allow None
        provider = cleaned.get("provider")
        if provider is None or "model" not in cleaned:
            return cleaned
        options = cleaned.get("options") or {}
        if not isinstance(options, dict):
            self.add_error("options", "must be a mapping of target options")
            return cleaned
        raw = {
            "provider": provider.name,
            "model": cleaned["model"],
            "weight": cleaned.get("weight") or 0,
            "enabled": bool(cleaned.get("enabled")),
            "context_window": cleaned.get("context_window"),
            **options,  # validated by the same schema as the file and the API
        }
        try:
            cleaned["options"] = target_options(parse_target(raw))
            check_listed([("model", provider.name, cleaned["model"])], {provider.name: provider})
        except ConfigError as exc:
            for item in exc.errors:
                if item.path in self.fields:
                    self.add_error(item.path, item.message)
                elif item.path.split(".")[0] in TARGET_OPTIONS:
                    self.add_error("options", str(item))  # e.g. "efforts: list each effort once"
                else:
                    self.add_error(None, str(item))
        return cleaned


class TargetFormSet(TargetFormSetBase):
    """A group keeps at least one target, and each (provider, model) once."""

    def clean(self) -> None:
        # Ours first: Django's own unique check would otherwise answer with a vaguer message.
        self._check_targets()
        super().clean()

    def _check_targets(self) -> None:
        seen: set[tuple[int, str]] = set()
        live = 0
        for form in self.forms:
            if not hasattr(form, "cleaned_data") or not form.cleaned_data:
                continue
            if form.cleaned_data.get("DELETE"):
                continue
            live += 1
            provider, model = form.cleaned_data.get("provider"), form.cleaned_data.get("model")
            if provider is not None and model:
                key = (provider.pk, model)
                if key in seen:
                    raise ValidationError(f"duplicate target {provider.name}/{model}")
                seen.add(key)
        if live == 0:
            raise ValidationError("a group needs at least one target")


class TargetInline(TargetInlineBase):
    model = Target
    form = TargetInlineForm
    formset = TargetFormSet
    fields = ("provider", "model", "position", "weight", "enabled", "context_window", "options")
    ordering = ("position",)
    extra = 0


class GroupAdminForm(VersionedForm):
    class Meta:
        model = Group
        fields = ["name", "aliases", "policy"]

    def clean_aliases(self) -> list[str]:
        from pydantic import TypeAdapter
        from pydantic import ValidationError as PydanticError

        from routing.config.aliases import conflicts_with_others
        from routing.config.schema import Aliases

        raw = self.cleaned_data.get("aliases") or []
        try:
            aliases = list(TypeAdapter(Aliases).validate_python(raw))
        except PydanticError as exc:
            raise ValidationError([e["msg"] for e in exc.errors()]) from None
        name = self.cleaned_data.get("name") or self.instance.name
        others = Group.objects.exclude(pk=self.instance.pk).values_list("name", "aliases")
        errors = conflicts_with_others(name, aliases, [(n, list(a or [])) for n, a in others])
        if errors:
            raise ValidationError([e.message for e in errors])
        return aliases

    def clean_policy(self) -> dict[str, Any]:
        try:
            flat = validate_policy_flat(self.cleaned_data.get("policy") or {})
            file_layer, global_layer = _policy_layers()
            validate_effective(resolve(BUILTIN_DEFAULTS, file_layer, global_layer, flat))
        except ConfigError as exc:
            raise ValidationError(_messages(exc)) from None
        return flat


@admin.register(Group)
class GroupAdmin(RecordsItsRows):
    form = GroupAdminForm
    object_type = "group"

    def snapshot(self, obj: Any) -> dict[str, Any]:
        return group_snapshot(obj)

    inlines = (TargetInline,)
    list_display = ("name", "aliases", "target_count", "version", "updated_at")
    search_fields = ("name",)
    readonly_fields = ("version", "created_at", "updated_at")
    fields = (
        "name",
        "aliases",
        "policy",
        "based_on_version",
        "version",
        "created_at",
        "updated_at",
    )

    @admin.display(description="targets")
    def target_count(self, obj: Group) -> int:
        return obj.targets.count()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        group_targets_edited(
            group=form.instance,
            changed=change and (form.has_changed() or any(fs.has_changed() for fs in formsets)),
        )

    def delete_through_service(self, obj: Any, *, actor: str) -> None:
        group_delete(name=obj.name, based_on=obj.version, actor=actor, path="admin")


# --- global settings -----------------------------------------------------------------


class GlobalSettingsAdminForm(VersionedForm):
    class Meta:
        model = GlobalSettings
        fields = ["policy"]

    def clean_policy(self) -> dict[str, Any]:
        try:  # as the service checks it: the fields, the file's layer, every group
            return checked_global_policy(self.instance, self.cleaned_data.get("policy") or {})
        except ConfigError as exc:
            raise ValidationError(_messages(exc)) from None


@admin.register(GlobalSettings)
class GlobalSettingsAdmin(SavesThroughService):
    form = GlobalSettingsAdminForm

    fields = ("policy", "based_on_version", "file_policy", "config_source", "version")
    readonly_fields = ("file_policy", "config_source", "version")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not GlobalSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_through_service(
        self, form: Any, *, based_on: int | None, actor: str
    ) -> GlobalSettings:
        if based_on is None:  # the singleton a first read creates
            based_on = GlobalSettings.load().version
        policy = form.cleaned_data["policy"]
        return global_set_policy(policy=policy, based_on=based_on, actor=actor, path="admin")


# --- API keys ------------------------------------------------------------------------


class ApiKeyAdminForm(AnyModelForm):
    class Meta:
        model = ApiKey
        fields = ["name"]

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if not good_key_name(name):
            raise ValidationError(KEY_NAME_RULE)
        return name


@admin.register(ApiKey)
class ApiKeyAdmin(ConfigAdmin):
    """Keys are created with ``manage.py createkey`` (the secret is shown once there)."""

    form = ApiKeyAdminForm

    list_display = ("name", "kind", "prefix", "groups", "created_at", "revoked_at")
    list_filter = ("kind", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "prefix")
    fields = ("name", "kind", "prefix", "groups", "hashed", "created_at", "revoked_at")
    readonly_fields = ("kind", "prefix", "groups", "hashed", "created_at", "revoked_at")
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = 0
        actor = f"admin:{request.user.get_username()}"
        for key in queryset.filter(revoked_at__isnull=True):
            key_revoke(key_id=key.pk, actor=actor, path="admin")
            count += 1
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        """The name is the one field the page edits: renamed through the service, which
        records the change, instead of the form's own save."""
        key_rename(
            key_id=obj.pk, name=form.cleaned_data["name"], actor=self._actor(request), path="admin"
        )
        obj.refresh_from_db()

    def delete_through_service(self, obj: Any, *, actor: str) -> None:
        key_delete(key_id=obj.pk, actor=actor, path="admin")
