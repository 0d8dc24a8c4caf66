"""The management API fixtures (``tests/api/conftest.py``) for the limits tests."""

from tests.api.conftest import api, live, runtime_state

__all__ = ["api", "live", "runtime_state"]
