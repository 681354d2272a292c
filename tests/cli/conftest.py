"""Fixtures for the `wfr` command-line tests: run `main([...])` in-process against the
per-test database (helpers live in cli_support.py)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from cli_support import Cli, Result
from workflow_runner.cli import main


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    """`cli("runs", "list", ...)` runs wfr in-process on this test's database."""
    monkeypatch.delenv("DATABASE_URL", raising=False)

    def run(*argv: str, env: dict[str, str] | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        environ = {"DATABASE_URL": db_url, "WORKFLOW_MODULES": "sample_workflows", **(env or {})}
        code = main(list(argv), out=out, err=err, environ=environ)
        return Result(code, out.getvalue(), err.getvalue())

    yield run
