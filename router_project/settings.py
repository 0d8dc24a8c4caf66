"""Django settings for Switchyard.

Everything an operator sets comes from the environment (SPEC §11):
``DATABASE_URL`` (default: an embedded SQLite file under ``var/``), ``REDIS_URL``
(unset: in-process health state and channel layer; set: both shared through Redis),
``SWITCHYARD_SECRET_KEY`` (encrypts provider credentials at rest) and
``SWITCHYARD_CONFIG`` (a config file applied at start-up by ``manage.py serve``).
Deploying behind TLS (``SWITCHYARD_HTTPS``), Django's secret key (``DJANGO_SECRET_KEY``),
the login lockout and the Content-Security-Policy: docs/operations.md, "Deploying safely".
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from routing.var_files import owner_only_dir, read_or_create_secret

BASE_DIR = Path(__file__).resolve().parent.parent
# Owner-only (0700; its files 0600): it holds the database, the secrets and the demo key.
VAR_DIR = owner_only_dir(Path(os.environ.get("SWITCHYARD_VAR_DIR", BASE_DIR / "var")))

# Unset: a random key generated once and kept in var/django-secret.key (0600), like the
# credential-encryption secret; routing.E010 refuses the old development value unless DEBUG.
SECRET_KEY = (
    os.environ.get("DJANGO_SECRET_KEY") or read_or_create_secret(VAR_DIR / "django-secret.key")[0]
)
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = os.environ.get(
    "DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver"
).split(",")
CSRF_TRUSTED_ORIGINS = [
    origin for origin in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if origin
]

# Served over TLS (directly or behind a reverse proxy that terminates it): cookies only over
# HTTPS, HSTS, and the proxy's X-Forwarded-Proto trusted to say the request was HTTPS. The
# proxy must set that header itself (overwriting a client's), or clients could claim HTTPS.
HTTPS = os.environ.get("SWITCHYARD_HTTPS", "") == "1"
if HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("SWITCHYARD_HSTS_SECONDS", 365 * 24 * 3600))

INSTALLED_APPS = [
    "daphne",
    "axes",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # /api/docs from the installed package's static files, not a CDN
    "template_partials",
    "routing",
    "routing.audit",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes requires: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]
# (/v1 is served by routing.api.asgi's handler with none of this middleware.)

# The staff login's lockout (django-axes; both the console's /login/ and the admin's): after
# SWITCHYARD_LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that pair
# is refused (even with the right password) until SWITCHYARD_LOGIN_COOLOFF_MINUTES pass
# without another try; a locked-out try never reaches the password hasher. Other users and
# addresses are unaffected.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("SWITCHYARD_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(
    minutes=float(os.environ.get("SWITCHYARD_LOGIN_COOLOFF_MINUTES", "15"))
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "dashboard.views.auth.client_address"  # the peer; no X-Forwarded-For
AXES_RESET_ON_SUCCESS = True  # a successful login forgets that pair's earlier failures
AXES_LOCKOUT_CALLABLE = "dashboard.views.auth.locked_out"  # a page saying so, with 429
AXES_VERBOSE = False  # no banner at start; failures and lockouts are still logged
# Failures are logged and kept (axes.AccessAttempt) with their username and address, which
# an operator needs to see who is locked out. The password is always masked; so is the form's
# CSRF token, the one other value it carries.
AXES_SENSITIVE_PARAMETERS = ["csrfmiddlewaretoken"]

# The Content-Security-Policy of every page Django serves (django-csp): scripts, styles and
# everything else only from this origin; htmx and the console's script are static files, and
# no template carries an inline script, event handler or style attribute.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

ROOT_URLCONF = "router_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "router_project.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'switchyard.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file-backed test database lets the live server thread and the tests share it;
    # one file per test process so concurrent runs never clobber each other.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    # WAL lets readers run beside the audit writer; IMMEDIATE transactions take the write
    # lock up front instead of failing with "database is locked" on a lock upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["router_project.formats"]  # dates with seconds and time zone
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

# Request bodies above this get a 413 before they are read (routing.api.edge; agents send
# long histories, so it is generous).
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("SWITCHYARD_MAX_BODY_BYTES", 8 * 1024 * 1024))

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

SWITCHYARD = {
    # "memory" or "redis" or a dotted path to a HealthStore class.
    "STATE_STORE": os.environ.get("SWITCHYARD_STATE_STORE", "redis" if REDIS_URL else "memory"),
    "REDIS_URL": REDIS_URL,
    # Extra routing algorithms, name -> dotted path of a RoutingAlgorithm subclass: the
    # only modules a group's algorithm may import (env: SWITCHYARD_ALGORITHMS=
    # "cheapest-first=myrouting.CheapestFirst,pkg.Other"; a bare path is its own name).
    "ALGORITHMS": dict(
        (name.strip(), path.strip() or name.strip())
        for name, _, path in (
            item.partition("=") for item in os.environ.get("SWITCHYARD_ALGORITHMS", "").split(",")
        )
        if name.strip()
    ),
    "SECRET_KEY": os.environ.get("SWITCHYARD_SECRET_KEY", ""),
    "CONFIG_FILE": os.environ.get("SWITCHYARD_CONFIG", ""),
    # How often each gateway process reads the configuration version (seconds, <= 1):
    # a change made by any process reaches this one within this interval, Redis or not.
    "CONFIG_CHECK_S": float(os.environ.get("SWITCHYARD_CONFIG_CHECK_S", "0.5")),
    # /metrics needs an admin key or a staff session unless this is set.
    "METRICS_PUBLIC": os.environ.get("SWITCHYARD_METRICS_PUBLIC", "") == "1",
    # Active health checks: seconds between cheap pings of each cooling target, off the
    # client's path (routing.gateway.checker); 0 turns them off.
    "HEALTH_CHECK_S": float(os.environ.get("SWITCHYARD_HEALTH_CHECK_S", "10")),
    # attach(hub) functions called whenever the runtime installs an event hub: they
    # subscribe cheap, non-blocking receivers to every call's events.
    "EVENT_SUBSCRIBERS": [
        "routing.audit.writer.attach",
        "routing.observability.metrics.attach",
        "dashboard.broadcast.attach",
        "dashboard.stats.attach",
    ],
    # The groups page marks a target "degraded" when, over the last 5 minutes, at least
    # DEGRADED_MIN_ATTEMPTS attempts were made and this share of them failed.
    "DEGRADED_FAILURE_RATE": float(os.environ.get("SWITCHYARD_DEGRADED_FAILURE_RATE", "0.5")),
    "DEGRADED_MIN_ATTEMPTS": int(os.environ.get("SWITCHYARD_DEGRADED_MIN_ATTEMPTS", "5")),
    # Audit retention (0 disables a bound); pruned automatically and by `prune_records`.
    "AUDIT_MAX_AGE_DAYS": int(os.environ.get("SWITCHYARD_AUDIT_MAX_AGE_DAYS", "30")),
    "AUDIT_MAX_ROWS": int(os.environ.get("SWITCHYARD_AUDIT_MAX_ROWS", "200000")),
    # Connections per provider (each open stream holds one); 0: from the open-file limit.
    "UPSTREAM_MAX_CONNECTIONS": int(os.environ.get("SWITCHYARD_UPSTREAM_MAX_CONNECTIONS", "0")),
    # A request's line, headers and body must arrive within this (slow clients): 408, closed.
    "REQUEST_READ_TIMEOUT_S": float(os.environ.get("SWITCHYARD_REQUEST_READ_TIMEOUT_S", "30")),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # One handler, on the root logger (it replaces any a server installed first), so every
    # line appears once and test log capture sees ours.
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "switchyard": {"level": os.environ.get("SWITCHYARD_LOG_LEVEL", "INFO")},
    },
}
