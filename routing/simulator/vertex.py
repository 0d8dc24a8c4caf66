"""Google Vertex AI for the simulator: its model paths for both publishers, bearer tokens it
issued itself, and the OAuth token endpoint a service-account file's ``token_uri`` names.

Paths (SPEC §19)::

    POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict
         … :streamRawPredict           the Messages body without ``model``, with
                                        ``anthropic_version: vertex-2023-10-16``
         …/models/count-tokens:rawPredict   ``{"input_tokens": n}`` (the body names the model)
    POST …/publishers/google/models/{model}:generateContent
         … :streamGenerateContent?alt=sse   Gemini's shapes (``routing.simulator.gemini``)
    POST /token                         the OAuth 2.0 JWT-bearer grant google-auth sends

Every model path wants ``Authorization: Bearer <a token this simulator issued>``; anything
else is Google's 401 ``UNAUTHENTICATED`` (echoing the presented token on purpose, as other
routes echo keys: the gateway under test must keep it out of what it records).

The token endpoint verifies the grant's assertion as Google does: an RS256 JWT whose
signature checks against the public key registered for its ``iss`` (the service account's
``client_email``), ``aud`` Google's token URI, a ``cloud-platform`` scope and a live ``exp``.
It counts the tokens it issues (``GoogleAuthority.fetches``) and gives them the
``expires_in`` a test sets. Verification uses ``cryptography`` directly, apart from the
google-auth the gateway signs with, so the suite compares two implementations.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from routing.simulator.script import Fail

ANTHROPIC_VERSION = "vertex-2023-10-16"
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # what google-auth puts in aud
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ACTIONS = {
    "anthropic": frozenset({"rawPredict", "streamRawPredict"}),
    "google": frozenset({"generateContent", "streamGenerateContent"}),
}
COUNT_TOKENS = "count-tokens"


@dataclass(frozen=True, slots=True)
class VertexPath:
    """What a Vertex model path names."""

    project: str
    region: str
    publisher: str  # "anthropic" or "google"
    model: str
    action: str

    @property
    def stream(self) -> bool:
        return self.action.startswith("stream")

    @property
    def count_tokens(self) -> bool:
        return self.publisher == "anthropic" and self.model == COUNT_TOKENS


def vertex_path(path: str) -> VertexPath | None:
    """``/v1/projects/{p}/locations/{r}/publishers/{pub}/models/{model}:{action}``, parsed
    (None: not a Vertex model path)."""
    parts = path.split("/")
    if len(parts) != 10 or parts[:2] != ["", "v1"]:
        return None
    _, _, projects, project, locations, region, publishers, publisher, models, target = parts
    if (projects, locations, publishers, models) != (
        "projects",
        "locations",
        "publishers",
        "models",
    ):
        return None
    model, _, action = target.partition(":")
    if action not in ACTIONS.get(publisher, ()):
        return None
    return VertexPath(project, region, publisher, model, action)


def google_error(status: int, message: str, name: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": name}}


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


@dataclass
class GoogleAuthority:
    """The simulated Google identity side: registered service accounts, issued tokens.

    Thread-safe: tests register accounts and read counters from their thread while the
    server's loop issues and checks tokens."""

    expires_in: int = 3600
    fetches: int = 0
    refusals: int = 0  # token requests refused (bad signature, unknown account, ...)
    refuse_next: int = 0  # fault on demand: refuse this many token requests
    _keys: dict[str, rsa.RSAPublicKey] = field(default_factory=dict)
    _tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry (time.time())
    _revoked: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, client_email: str, public_key_pem: bytes) -> None:
        key = serialization.load_pem_public_key(public_key_pem)
        if not isinstance(key, rsa.RSAPublicKey):
            raise ValueError("a service account's key is RSA")
        with self._lock:
            self._keys[client_email] = key

    def register_file(self, path: str) -> str:
        """Trust a service-account key file (its private key's public half, under its
        ``client_email``, which is returned): how the demo's simulator process accepts the
        file the demo's gateway signs with."""
        with open(path, encoding="utf-8") as file:
            info = json.load(file)
        key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.register(info["client_email"], public)
        return str(info["client_email"])

    def revoke_all(self) -> None:
        """Every token issued so far stops working (as when a key is disabled)."""
        with self._lock:
            self._revoked += self._tokens
            self._tokens.clear()

    def reset(self) -> None:
        with self._lock:
            self._tokens.clear()
            self._revoked.clear()
            self.fetches = self.refusals = self.refuse_next = 0

    def issued(self) -> list[str]:
        """Every token issued since the last reset (for scans that none leaked)."""
        with self._lock:
            return [*self._tokens, *self._revoked]

    def valid(self, token: str) -> bool:
        with self._lock:
            expiry = self._tokens.get(token)
        return expiry is not None and time.time() < expiry

    def grant(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer (status, JSON) to a JWT-bearer grant."""
        problem = self._check(form)
        with self._lock:
            if problem is None and self.refuse_next > 0:
                self.refuse_next -= 1
                problem = "Account disabled (simulated)."
            if problem is not None:
                self.refusals += 1
                return 400, {"error": "invalid_grant", "error_description": problem}
            token = f"ya29.sim-{secrets.token_urlsafe(24)}"
            self._tokens[token] = time.time() + self.expires_in
            self.fetches += 1
            return 200, {
                "access_token": token,
                "expires_in": self.expires_in,
                "token_type": "Bearer",
            }

    def _check(self, form: dict[str, str]) -> str | None:
        if form.get("grant_type") != JWT_BEARER:
            return "Unsupported grant type."
        try:
            head, payload, signature = form.get("assertion", "").split(".")
            header, claims = json.loads(_b64(head)), json.loads(_b64(payload))
        except ValueError:
            return "Invalid JWT: not a signed token."
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "Invalid JWT: not a signed token."
        with self._lock:
            key = self._keys.get(str(claims.get("iss")))
        if key is None or header.get("alg") != "RS256":
            return "Invalid JWT: unknown service account or algorithm."
        try:
            key.verify(
                _b64(signature), f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except (InvalidSignature, ValueError):
            return "Invalid JWT Signature."
        now = time.time()
        if claims.get("aud") != GOOGLE_TOKEN_AUDIENCE:
            return "Invalid JWT: wrong audience."
        if SCOPE not in str(claims.get("scope", "")).split():
            return "Invalid JWT: the cloud-platform scope is missing."
        if not (float(claims.get("iat", 0)) - 300 <= now < float(claims.get("exp", 0))):
            return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        return None


def bearer_failure(authority: GoogleAuthority, authorization: str) -> Fail | None:
    """Google's 401 for a model path without a token this simulator issued (None: fine)."""
    presented = authorization.removeprefix("Bearer ").strip()
    if authorization.startswith("Bearer ") and authority.valid(presented):
        return None
    message = (
        "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        f"login cookie or other valid authentication credential. (presented: {presented})"
    )
    return Fail(401, body=json.dumps(google_error(401, message, "UNAUTHENTICATED")))


def body_problem(path: VertexPath, body: dict[str, Any]) -> str | None:
    """What Vertex refuses in a body on this path (None: nothing)."""
    if path.publisher != "anthropic":
        return None
    if path.count_tokens:
        return None if body.get("model") else "model: field required"
    if "model" in body:
        return "model: Extra inputs are not permitted (the model is named by the URL)"
    if body.get("anthropic_version") != ANTHROPIC_VERSION:
        return f"anthropic_version: must be {ANTHROPIC_VERSION!r}"
    return None
