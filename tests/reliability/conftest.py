"""Fixtures of the reliability suite: fresh databases on demand and the sample registry."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url


@pytest.fixture
def fresh_db(pg_server_url: str, template_database: str) -> Iterator[Callable[[], str]]:
    """A factory of fresh migrated databases (each dropped at the end of the test)."""
    made: list[str] = []

    def make() -> str:
        name = f"wfr_r_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(
                f'CREATE DATABASE "{name}" TEMPLATE "{template_database}" STRATEGY FILE_COPY'
            )
        made.append(name)
        return database_url(pg_server_url, name)

    yield make
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def samples() -> WorkflowRegistry:
    """A registry holding the five sample workflows."""
    import sample_workflows

    registry = WorkflowRegistry()
    for name in sample_workflows.__all__:
        registry.register(getattr(sample_workflows, name))
    return registry
