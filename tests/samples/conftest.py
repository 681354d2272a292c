"""The sample workflows, tested the way a user tests their own: with the test kit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from workflow_runner.testing import WorkflowTestEnv


@pytest.fixture
def env(pg_server_url: str) -> Iterator[WorkflowTestEnv]:
    """The samples on a fresh database, at 2026-01-05T09:00:00Z."""
    with WorkflowTestEnv(
        modules=["sample_workflows"], now="2026-01-05T09:00:00Z", database_url=pg_server_url
    ) as env:
        yield env
