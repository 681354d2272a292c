"""What every `wfr` command shares: its context (arguments, output, the database,
the workflows) and the parsing of ids and instants."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..clock import SystemClock
from ..definition import WorkflowRegistry, default_registry, load_workflow_modules
from ..definition.hosts import DefinitionHosts
from ..durations import is_duration, parse_duration, parse_instant
from ..engine.operator_actions import Operator
from ..engine.run_lookup import resolve_run
from ..errors import InvalidInput
from ..local.kept import keep_local_code, kept_code_of
from ..store import RunSummary, Store, connect
from .render import Output

Handler = Callable[["Context"], int]


class UsageError(InvalidInput):
    """A command line that cannot be carried out as given (exit code 2)."""


@dataclass
class Context:
    """What every command gets: its arguments, output, and lazily the database."""

    args: argparse.Namespace
    output: Output
    environ: dict[str, str]
    _store: Store | None = field(default=None, repr=False)
    _registry: WorkflowRegistry | None = field(default=None, repr=False)
    _kept: DefinitionHosts | None = field(default=None, repr=False)

    @property
    def database_url(self) -> str:
        url = getattr(self.args, "database_url", None) or self.environ.get("DATABASE_URL")
        if not url:
            raise UsageError("no database: pass --database-url URL or set DATABASE_URL")
        return str(url)

    def store(self) -> Store:
        if self._store is None:
            self._store = connect(self.database_url)
        return self._store

    def registry(self) -> WorkflowRegistry:
        """The workflows of WORKFLOW_MODULES, imported with the current directory on the
        module path (as `python -m` would), so `my_workflows.trial` is found from the
        project folder without setting PYTHONPATH."""
        if self._registry is None:
            here = os.getcwd()
            if here not in sys.path:
                sys.path.insert(0, here)
            self._registry = load_workflow_modules(self.environ, default_registry())
        return self._registry

    def kept_code(self, local: bool | None = None) -> DefinitionHosts:
        """Where definitions gone from WORKFLOW_MODULES still run (definition/hosts.py): on a
        local database (`local`, or one with a local clock) the module sources `wfr local`
        kept — a `wfr local` command (`local=True`) keeps the current ones first —, on any
        other the function versions registered in it (AWS)."""
        if self._kept is None:
            store = self.store()
            if local:
                self._kept = keep_local_code(store, self.registry(), self.now())
            else:
                self._kept = kept_code_of(store)
        return self._kept

    def run(self, attribute: str = "run_id", what: str = "RUN_ID") -> RunSummary:
        """The run the argument names: a full run id or a unique prefix of at least four
        hex digits, in --tenant when given, else in any tenant."""
        raw = getattr(self.args, attribute)
        try:
            return resolve_run(self.store(), raw, self.tenant(required=False))
        except InvalidInput as error:
            raise UsageError(f"{what}: {error}") from None

    def operator(self) -> Operator:
        """Who acts (recorded on the run's stream) and the --reason given, if any."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        reason = getattr(self.args, "reason", None)
        return Operator(by=f"cli ({user}@{socket.gethostname()})", reason=reason or None)

    def tenant(self, required: bool = True) -> str | None:
        raw = getattr(self.args, "tenant", None)
        if raw is None:
            if required:
                raise UsageError("--tenant is required")
            return None
        return parse_uuid(raw, "--tenant")

    def now(self) -> datetime:
        """Business time: --now, else the local runtime's clock when this database has
        one (set by `wfr local` / `wfr demo`), else the system clock."""
        raw = getattr(self.args, "now", None)
        if raw:
            return parse_now(raw, "--now")
        local = self.store().local.clock()
        return local if local is not None else SystemClock().now()

    def close(self) -> None:
        if self._store is not None and not self._store.closed:
            self._store.close()


def parse_uuid(raw: str, what: str) -> str:
    """A UUID argument in canonical form.

    Raises:
        UsageError: `raw` is not a UUID.
    """
    try:
        return str(uuid.UUID(str(raw)))
    except ValueError:
        raise UsageError(f"{what} must be a UUID, got {raw!r}") from None


def parse_duration_arg(raw: str, what: str) -> timedelta:
    """A duration argument (durations.py): 90s, 30m, 12h, 30d, 1w or ISO-8601 (P90D).

    Raises:
        UsageError: not a duration.
    """
    try:
        return parse_duration(raw.strip())
    except InvalidInput as error:
        raise UsageError(f"{what}: {error}") from None


def parse_since(raw: str, what: str, now: datetime) -> datetime:
    """An instant, or how long ago as a duration: 90m, 1h, 2d, 1w or ISO-8601 (PT1H).

    Raises:
        UsageError: neither.
    """
    if is_duration(raw.strip()):
        return now - parse_duration_arg(raw, what)
    try:
        return parse_instant(raw)
    except InvalidInput:
        raise UsageError(
            f"{what}: expected an instant (2026-01-05T09:00:00Z) or a duration ago "
            f"(30m, 2h, 1d, PT1H), got {raw!r}"
        ) from None


def parse_now(raw: str, what: str) -> datetime:
    """An ISO-8601 instant argument such as 2026-01-05T09:00:00Z.

    Raises:
        UsageError: `raw` is not an instant with an offset.
    """
    try:
        return parse_instant(raw)
    except InvalidInput as error:
        raise UsageError(f"{what}: {error}") from None
