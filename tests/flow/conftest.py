"""Fixtures of the flow-control tests: test-kit environments on the session's server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from workflow_runner.testing import WorkflowTestEnv


@pytest.fixture
def make_env(pg_server_url: str) -> Iterator[Callable[..., WorkflowTestEnv]]:
    """`make_env(workflows=[...], now=...)`: an entered WorkflowTestEnv, closed after."""
    with ExitStack() as stack:

        def make(**kwargs: Any) -> WorkflowTestEnv:
            kwargs.setdefault("database_url", pg_server_url)
            return stack.enter_context(WorkflowTestEnv(**kwargs))

        yield make
