"""Audit records: append-only rows written by the background writer, read by the admin
and the API, and deleted only by retention (``routing.audit.services.records_prune``).

Decisions:

- **Names, not foreign keys, for routes.** ``group``, ``target`` (``provider/model``) and
  ``provider`` are stored as text: records outlive the configuration rows they mention,
  and a group renamed or deleted later must not rewrite or erase history.
- **Attempts point at their call by ``call_id``** (``to_field``), so the writer can insert
  a batch of calls and their attempts without reading generated primary keys back.
  The relation is ``DO_NOTHING``: retention deletes attempts first, then calls, each in
  one statement, instead of Django collecting every row in Python to cascade.
- **Fallback events carry ``call_id`` as plain text**: a fallback is published before its
  call finishes, so it may be written in an earlier batch than the call row.
- **No headers, no request or response bodies.** Messages are the failure text the call
  path already scrubbed of the target's credential; the writer scrubs every configured
  credential once more and truncates to ``MESSAGE_MAX``.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models

MESSAGE_MAX = 2000
ROUTE_MAX = 300  # provider slug (50) + "/" + model id (200), with room to spare


class Outcome(models.TextChoices):
    """Mirrors ``routing.gateway.events.CallOutcome``; kept here so migrations stay stable."""

    OK = "ok", "ok"
    FAILED = "failed", "failed"
    ABORTED = "aborted", "aborted"
    REFUSED = "refused", "refused"


class SwitchReason(models.TextChoices):
    """Mirrors ``routing.engine.plan.SwitchReason``; kept here so migrations stay stable."""

    THRESHOLD = "threshold", "threshold"
    PROBE = "probe", "probe"
    RETRY_EXHAUSTED = "retry-exhausted", "retry exhausted"
    NOT_RETRYABLE = "not-retryable", "not retryable"


class HealthKind(models.TextChoices):
    """Mirrors ``routing.engine.health.EventKind``."""

    COOLING = "cooling", "cooling"
    DISABLED = "disabled", "disabled"
    REVIVED = "revived", "revived"
    PROBE = "probe", "probe result"
    RESET = "reset", "operator reset"
    ENABLED = "enabled", "operator re-enable"
    FORCE_REVIVED = "force-revived", "force-revived"


class FrontDoor(models.TextChoices):
    """The protocol a call came in through (SPEC §12)."""

    CHAT = "chat", "chat completions"
    MESSAGES = "messages", "Anthropic messages"
    RESPONSES = "responses", "OpenAI responses"
    GEMINI = "gemini", "Google Gemini"
    EMBEDDINGS = "embeddings", "embeddings"


class UpstreamKind(models.TextChoices):
    """The protocol an attempt spoke to its target (the provider's ``kind``, SPEC §12)."""

    OPENAI = "openai", "OpenAI chat completions"
    ANTHROPIC = "anthropic", "Anthropic messages"
    OPENAI_RESPONSES = "openai-responses", "OpenAI responses"
    GEMINI = "gemini", "Google Gemini (generateContent)"
    BEDROCK_CONVERSE = "bedrock-converse", "Amazon Bedrock Converse"


class ChangePath(models.TextChoices):
    FILE = "file", "config file"
    API = "api", "management API"
    PAGE = "page", "dashboard page"
    ADMIN = "admin", "Django admin"
    CLI = "cli", "management command"


class Call(models.Model):
    """One client request and how it ended."""

    call_id = models.CharField(max_length=64, unique=True)
    group = models.CharField(max_length=ROUTE_MAX, db_index=True)
    session = models.CharField(max_length=200, blank=True, default="")
    stream = models.BooleanField(default=False)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    served_by = models.CharField(max_length=ROUTE_MAX, blank=True, default="")
    error_code = models.CharField(max_length=40, blank=True, default="")
    http_status = models.PositiveSmallIntegerField(default=200)
    started_at = models.DateTimeField(db_index=True)
    elapsed_ms = models.FloatField()
    ttft_ms = models.FloatField(null=True, blank=True, verbose_name="time to first token (ms)")
    overhead_ms = models.FloatField(null=True, blank=True, verbose_name="gateway overhead (ms)")
    # What every attempt that reported usage was billed, summed (the answer's tokens and
    # those of an attempt that failed after its usage): the same attempts as ``cost`` and
    # the token budgets (SPEC §17). Older rows hold the answer's only: the other attempts'
    # usage was never stored, so there is nothing to migrate them from.
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Each attempt's usage at its own target's price, summed; null: no usage or no price
    # (never 0).
    cost = models.FloatField(null=True, blank=True)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    # The gateway key that made the call: its id and name, never its secret or hash.
    key_id = models.PositiveIntegerField(null=True, blank=True, verbose_name="key id")
    key_name = models.CharField(max_length=100, blank=True, default="")
    front_door = models.CharField(max_length=12, choices=FrontDoor.choices, default=FrontDoor.CHAT)
    # Served by a target other than the first one the call tried (SPEC §14).
    served_by_fallback = models.BooleanField(default=False)
    # A refused call's reason: the error message the door answered (SPEC §12).
    reason = models.CharField(max_length=500, blank=True, default="", db_default="")
    # Its OpenTelemetry trace (32 hex digits) when tracing is on and the call was sampled.
    trace_id = models.CharField(max_length=32, blank=True, default="", db_default="")

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]
        # The calls page filters on one column and pages newest-first by id (keyset), so
        # each filter column has a (column, id) index the query can walk backwards.
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["group", "-id"]),
            models.Index(fields=["key_id", "-id"], name="audit_call_key_id_idx"),
            models.Index(fields=["served_by", "-id"], name="audit_call_served_id_idx"),
            models.Index(fields=["outcome", "-id"], name="audit_call_outcome_id_idx"),
            models.Index(fields=["error_code", "-id"], name="audit_call_code_id_idx"),
            models.Index(fields=["session", "-id"], name="audit_call_session_id_idx"),
            models.Index(fields=["front_door", "-id"], name="audit_call_door_id_idx"),
            models.Index(fields=["served_by_fallback", "-id"], name="audit_call_fallback_id_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.call_id} {self.group} {self.outcome}"


class Attempt(models.Model):
    """One upstream HTTP call inside a call; ``index`` is its 1-based place in the call."""

    call = models.ForeignKey(
        Call,
        to_field="call_id",
        db_column="call_id",
        related_name="attempts",
        on_delete=models.DO_NOTHING,
    )
    index = models.PositiveSmallIntegerField()
    target = models.CharField(max_length=ROUTE_MAX, db_index=True)
    try_number = models.PositiveSmallIntegerField()
    ok = models.BooleanField()
    code = models.CharField(max_length=40, blank=True, default="", db_index=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    message = models.TextField(blank=True, default="")
    reason = models.CharField(max_length=20, blank=True, default="", choices=SwitchReason.choices)
    elapsed_ms = models.FloatField()
    will_retry = models.BooleanField(default=False)
    switched = models.BooleanField(default=False)
    switched_to = models.CharField(max_length=ROUTE_MAX, blank=True, default="")
    probe = models.BooleanField(default=False)
    # what the outbound copy of the request changed, comma-separated (SPEC §13)
    rewrites = models.CharField(max_length=500, blank=True, default="")
    cooldown_s = models.FloatField(null=True, blank=True, verbose_name="cooling earned (s)")
    # the target's upstream kind when the attempt was made (rows older than it: openai)
    upstream_kind = models.CharField(
        max_length=20, choices=UpstreamKind.choices, default=UpstreamKind.OPENAI
    )
    # a mid-stream rescue: this attempt continued a stream cut after its commit point (§16)
    continuation = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering: ClassVar[list[str]] = ["call_id", "index"]

    def __str__(self) -> str:
        return f"{self.index}. {self.target} {'ok' if self.ok else self.code}"


class Fallback(models.Model):
    """A call moved from one target to the next (``to_target`` empty: nothing was left)."""

    at = models.DateTimeField(db_index=True)
    call_id = models.CharField(max_length=64, db_index=True)
    group = models.CharField(max_length=ROUTE_MAX, db_index=True)
    from_target = models.CharField(max_length=ROUTE_MAX, db_index=True)
    to_target = models.CharField(max_length=ROUTE_MAX, blank=True, default="")
    reason = models.CharField(max_length=20, choices=SwitchReason.choices)
    code = models.CharField(max_length=40, db_index=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    message = models.TextField(blank=True, default="")
    cooldown_s = models.FloatField(null=True, blank=True, verbose_name="cooldown applied (s)")

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]
        verbose_name = "fallback event"

    def __str__(self) -> str:
        return f"{self.from_target} → {self.to_target or '-'} ({self.code})"


class HealthTransition(models.Model):
    """A target or provider changed health. ``target`` is empty for provider-level events
    (disabled / re-enabled credentials); ``actor`` names the operator for reset/enable."""

    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=20, choices=HealthKind.choices, db_index=True)
    target = models.CharField(max_length=ROUTE_MAX, blank=True, default="", db_index=True)
    provider = models.CharField(max_length=100, blank=True, default="", db_index=True)
    until = models.DateTimeField(null=True, blank=True)
    code = models.CharField(max_length=40, blank=True, default="", db_index=True)
    ok = models.BooleanField(null=True, blank=True, verbose_name="probe ok")
    cooldown_s = models.FloatField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True, default="")
    call_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    message = models.TextField(blank=True, default="")

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]
        verbose_name = "health event"

    def __str__(self) -> str:
        return f"{self.kind} {self.target or self.provider}"


class ConfigChange(models.Model):
    """Who changed which configuration object, when, through which path, and how.

    ``before``/``after`` are the object's fields with credentials replaced by a marker
    (``routing.audit.services``); ``diff`` maps each changed dotted field to
    ``{"before": …, "after": …}``.
    """

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200, db_index=True)
    path = models.CharField(max_length=10, choices=ChangePath.choices, db_index=True)
    object_type = models.CharField(max_length=40, db_index=True)
    object_name = models.CharField(max_length=ROUTE_MAX, db_index=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    diff = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering: ClassVar[list[str]] = ["-id"]

    def __str__(self) -> str:
        return f"{self.object_type} {self.object_name} by {self.actor} via {self.path}"
