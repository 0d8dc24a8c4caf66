"""Service-account files for the simulator's Google token endpoint: an RSA key made here
with ``cryptography``, its public half registered with the simulator, the JSON key file
google-auth reads written with ``token_uri`` pointing at the simulator."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from routing.simulator import FakeUpstream

CLIENT_EMAIL = "switchyard-test@sim-project.iam.gserviceaccount.com"
KEY_ID = "0123456789abcdef0123456789abcdef01234567"


@functools.cache
def private_key(name: str = "default") -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(name: str = "default") -> str:
    return (
        private_key(name)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


def write_service_account(
    upstream: FakeUpstream,
    directory: Path,
    *,
    email: str = CLIENT_EMAIL,
    key: str = "default",
    register: bool = True,
) -> Path:
    """A service-account key file for ``upstream``'s token endpoint (its public key
    registered there unless ``register`` is False: then the endpoint refuses it)."""
    if register:
        public = (
            private_key(key)
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        upstream.google.register(email, public)
    info = {
        "type": "service_account",
        "project_id": "sim-project",
        "private_key_id": KEY_ID,
        "private_key": private_pem(key),
        "client_email": email,
        "client_id": "100000000000000000001",
        "token_uri": upstream.token_uri,
    }
    path = directory / f"{email.split('@')[0]}-{key}.json"
    path.write_text(json.dumps(info))
    path.chmod(0o600)
    return path
