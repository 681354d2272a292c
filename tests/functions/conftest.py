"""Fixtures for the Lambda handler tests: the handlers loaded from template.yaml's
CodeUris, an in-process runtime on the test's database, and the EMF metrics and logs
the handlers print."""

from __future__ import annotations

import io
import logging
import os

# Before Powertools is imported by any handler: no X-Ray outside Lambda, a stable
# service name, and no real AWS credentials anywhere near the tests.
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "workflow-runner")
os.environ.setdefault("AWS_DEFAULT_REGION", "eu-central-1")

from collections.abc import Callable, Iterator

import pytest
from workflow_runner.aws.inprocess import FakeLambdaContext, build_inprocess_runtime
from workflow_runner.aws.template import Handler, load_handlers
from workflow_runner.clock import ManualClock
from workflow_runner.ports import Runtime, set_runtime
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.functions.helpers import TEMPLATE, Emitted


@pytest.fixture(scope="session")
def handlers() -> dict[str, Handler]:
    """Every function's handler, imported from the CodeUri template.yaml names."""
    return load_handlers(TEMPLATE)


@pytest.fixture
def context() -> FakeLambdaContext:
    return FakeLambdaContext()


@pytest.fixture
def runtime(store: Store, clock: ManualClock, db_url: str) -> Iterator[Runtime]:
    """The in-process runtime on this test's database, installed for the handlers."""
    rt = build_inprocess_runtime(
        store,
        clock,
        settings=Settings(database_url=db_url, mail_sender="noreply@example.com"),
    )
    set_runtime(rt)
    try:
        yield rt
    finally:
        set_runtime(None)


@pytest.fixture
def emitted(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[[], Emitted]]:
    """Call emitted() after a handler ran to parse what it emitted so far: EMF metrics
    from stdout, and the Logger's JSON lines (captured by an extra handler with the
    Powertools formatter, because its own handler keeps the stdout it started with)."""
    from workflow_runner.aws.lambda_support import logger

    lines = io.StringIO()
    extra = logging.StreamHandler(lines)
    extra.setFormatter(logger.registered_formatter)
    logging.getLogger(logger.name).addHandler(extra)

    def read() -> Emitted:
        text = capsys.readouterr().out + lines.getvalue()
        lines.seek(0)
        lines.truncate()
        return Emitted(text)

    try:
        yield read
    finally:
        logging.getLogger(logger.name).removeHandler(extra)
