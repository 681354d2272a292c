"""The whole stack in one process: template.yaml's EventBridge patterns route events to
the functions' real handlers, on the test's database, under a manual clock."""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "workflow-runner")

from collections.abc import Iterator

import pytest
from workflow_runner.aws.inprocess import InProcessApp, build_inprocess_runtime
from workflow_runner.aws.template import Handler, event_routes, load_handlers, load_template
from workflow_runner.clock import ManualClock
from workflow_runner.ports import set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.functions.helpers import TEMPLATE


@pytest.fixture(scope="session")
def stack_handlers() -> dict[str, Handler]:
    return load_handlers(TEMPLATE)


@pytest.fixture
def app(
    store: Store, clock: ManualClock, db_url: str, stack_handlers: dict[str, Handler]
) -> Iterator[InProcessApp]:
    settings = Settings(database_url=db_url, mail_sender="noreply@example.com")
    runtime = build_inprocess_runtime(store, clock, settings)
    set_runtime(runtime)
    try:
        yield InProcessApp(runtime, stack_handlers, event_routes(load_template(TEMPLATE)))
    finally:
        set_runtime(None)
