"""Fixtures of the interleaving tests: a lab of databases copied per schedule."""

from __future__ import annotations

import pytest

from tests.interleaving.harness import Lab


@pytest.fixture
def lab(pg_server_url: str, template_database: str) -> Lab:
    return Lab(pg_server_url, template_database)
