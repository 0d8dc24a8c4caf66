"""Let the engine tests run with pytest-django switched off (``-p no:django``).

pyproject.toml sets the ``DJANGO_SETTINGS_MODULE`` ini key for the rest of the suite.
Without the plugin that key is unknown, and pytest's "Unknown config option" warning is
an error under our ``filterwarnings = error``. Declaring the key here (only when the
plugin is absent) keeps the engine suite runnable without Django. pytest calls
``pytest_addoption`` for initial conftests only, i.e. when ``tests/engine`` (or a file
in it) is named on the command line — which is how this suite is run without Django.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("django"):
        parser.addini("DJANGO_SETTINGS_MODULE", "read by pytest-django; unused without it")
