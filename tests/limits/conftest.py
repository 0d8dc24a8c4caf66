"""The management API fixtures (``tests/api/conftest.py``) and the browser
(``tests/dashboard/conftest.py``) for the limits tests."""

from tests.api.conftest import api, live, runtime_state
from tests.dashboard.conftest import browser

__all__ = ["api", "browser", "live", "runtime_state"]
