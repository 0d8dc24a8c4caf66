"""Data migrations do what they say on a database that holds rows (issue 37 item 14:
provider header values stored in clear become encrypted, and back)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("routing", "0008_api_key_limits")]
AFTER = [("routing", "0009_provider_headers_encrypted")]


@pytest.mark.django_db(transaction=True)
def test_stored_header_values_are_encrypted_and_decrypted_back() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps.get_model("routing", "Provider")
    old.objects.create(name="p", base_url="http://localhost:1/v1", headers={"x-org": "hv-secret-1"})
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        from routing import crypto

        # the model as it was then: later migrations add columns today's model reads
        then = executor.loader.project_state(AFTER).apps.get_model("routing", "Provider")
        row = then.objects.get(name="p")
        assert row.headers_encrypted["x-org"].startswith("gAAAAA")
        assert crypto.decrypt(row.headers_encrypted["x-org"]) == "hv-secret-1"

        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)
        back = executor.loader.project_state(BEFORE).apps.get_model("routing", "Provider")
        assert back.objects.get(name="p").headers == {"x-org": "hv-secret-1"}
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
