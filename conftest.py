"""Repository-level pytest hooks: notebooks collected by nbval carry the `notebooks` marker."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if str(item.fspath).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebooks)
