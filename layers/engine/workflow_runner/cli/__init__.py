"""The `wfr` command line (entry point `workflow_runner.cli:main`)."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
