"""Shared fixtures: one PostgreSQL server per test session (embedded unless DATABASE_URL
is set) and a fresh database per test, cloned from a migrated template database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.embedded import database_url, start_embedded_postgres
from workflow_runner.store import Store, apply_migrations, connect

# The machine is shared and has two cores: timing-based health checks would make
# property tests fail for reasons that have nothing to do with the property.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """Admin URL of the session's PostgreSQL server."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    server, url = start_embedded_postgres(fast=True)
    try:
        yield url
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def template_database(pg_server_url: str) -> Iterator[str]:
    """A migrated database that every test database is cloned from."""
    name = f"wfr_template_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(database_url(pg_server_url, name), autocommit=True) as conn:
        apply_migrations(conn)  # type: ignore[arg-type]
    try:
        yield name
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """URL of a fresh, migrated database for one test."""
    name = f"wfr_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}" STRATEGY FILE_COPY')
    try:
        yield database_url(pg_server_url, name)
    finally:
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = connect(db_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def registry() -> WorkflowRegistry:
    """An empty registry per test (define workflows with register=False and add them)."""
    return WorkflowRegistry()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
