"""The interleaving tests' fixture: a lab of databases copied from the session's
migrated template (lab.py)."""

from __future__ import annotations

import pytest

from tests.interleaving.lab import Lab


@pytest.fixture
def lab(pg_server_url: str, template_database: str) -> Lab:
    return Lab(pg_server_url, template_database)
