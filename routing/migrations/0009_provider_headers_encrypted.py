"""Provider header values are secrets like ``api_key`` (issue 37 item 14): the column
becomes ``headers_encrypted``, ``{name: Fernet token}``, and every stored value is
encrypted with the current secret (``routing.crypto``); reversing decrypts them."""

from typing import Any

from django.db import migrations, models


def encrypt_values(apps: Any, schema_editor: Any) -> None:
    from routing import crypto

    Provider = apps.get_model("routing", "Provider")
    for row in Provider.objects.all():
        if not row.headers_encrypted:
            continue
        row.headers_encrypted = {
            name: crypto.encrypt(str(value)) for name, value in row.headers_encrypted.items()
        }
        row.save(update_fields=["headers_encrypted"])


def decrypt_values(apps: Any, schema_editor: Any) -> None:
    from routing import crypto

    Provider = apps.get_model("routing", "Provider")
    for row in Provider.objects.all():
        if not row.headers_encrypted:
            continue
        row.headers_encrypted = {
            name: crypto.decrypt(token) for name, token in row.headers_encrypted.items()
        }
        row.save(update_fields=["headers_encrypted"])


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0008_api_key_limits"),
    ]

    operations = [
        migrations.RenameField(
            model_name="provider", old_name="headers", new_name="headers_encrypted"
        ),
        migrations.AlterField(
            model_name="provider",
            name="headers_encrypted",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
        migrations.RunPython(encrypt_values, decrypt_values),
    ]
