"""The `wfr` command line: argument parsing, the shared context, errors and exit codes.

Exit codes: 0 success; 1 the command ran but the answer is "no" (run not found,
redrive refused, doctor found problems, database error); 2 bad usage or bad input
(argparse's habit). Errors go to stderr as `wfr: error: ...`; results to stdout.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from ..clock import SystemClock
from ..durations import parse_instant
from ..errors import (
    InvalidInput,
    RunNotFound,
    StoreError,
    UnknownWorkflow,
    WorkflowDefinitionError,
    WorkflowRunnerError,
)
from ..registry import WorkflowRegistry, default_registry, load_workflow_modules
from ..store import Store, connect
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
        if self._registry is None:
            self._registry = load_workflow_modules(self.environ, default_registry())
        return self._registry

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
        from ..local.state import local_clock

        local = local_clock(self.store())
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


def parse_now(raw: str, what: str) -> datetime:
    """An ISO-8601 instant argument such as 2026-01-05T09:00:00Z.

    Raises:
        UsageError: `raw` is not an instant with an offset.
    """
    try:
        return parse_instant(raw)
    except InvalidInput as error:
        raise UsageError(f"{what}: {error}") from None


def _common(json_default: Any) -> argparse.ArgumentParser:
    """Options every command accepts, before or after its name."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url",
        metavar="URL",
        default=json_default,
        help="PostgreSQL URL (default: $DATABASE_URL)",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=json_default,
        help="machine-readable output",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The full `wfr` argument parser."""
    from . import dlq, local_commands, operate

    top = argparse.ArgumentParser(
        prog="wfr",
        description=(
            "workflow-runner: operate runs against any database (DATABASE_URL, Aurora "
            "included) and run workflows locally with a clock you control. Workflows "
            "come from the modules named in WORKFLOW_MODULES (default: sample_workflows)."
        ),
        parents=[_common(None)],
        epilog=(
            "Business time (--now) defaults to the local runtime's clock when the database "
            "has one (set by `wfr local` and `wfr demo`), else the system clock. Exit codes: "
            "0 done, 1 the answer is no (not found, refused, problems found), 2 bad usage "
            "or input (nothing written)."
        ),
    )
    # Sub-command copies of the common options must not overwrite values given before
    # the command name: they default to "absent".
    common = _common(argparse.SUPPRESS)
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def command(
        sub: Any, name: str, handler: Handler, help: str, **kw: Any
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, help=help, description=help, parents=[common], **kw
        )
        parser.set_defaults(handler=handler)
        return parser

    command(commands, "migrate", operate.cmd_migrate, "apply pending schema migrations")

    runs = commands.add_parser("runs", help="list runs or show one run's timeline")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    runs_sub.required = True
    p = command(runs_sub, "list", operate.cmd_runs_list, "list a tenant's runs, newest first")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--workflow", metavar="W", help="only runs of this workflow")
    p.add_argument(
        "--status",
        choices=["running", "waiting", "completed", "failed", "cancelled"],
        help="only runs with this status",
    )
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p = command(runs_sub, "show", operate.cmd_runs_show, "show one run's timeline")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")

    p = command(commands, "pending", operate.cmd_pending, "list a tenant's pending rows")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--due-before", metavar="ISO", help="only rows due at or before this instant")

    p = command(
        commands,
        "resume",
        operate.cmd_resume,
        "resume a suspended run now (what a ResumeRun invoke does); prints the outcome",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--step", type=int, help="step index of the suspension (default: the open one)")
    p.add_argument("--force", action="store_true", help="resume even if it is not due yet")
    p.add_argument("--now", metavar="ISO", help="business time (default: see `wfr --help`)")

    p = command(commands, "cancel", operate.cmd_cancel, "cancel a run (it never resumes)")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--reason", metavar="TEXT", help="recorded on the run's stream")
    p.add_argument("--now", metavar="ISO", help="business time")

    p = command(
        commands,
        "redrive",
        operate.cmd_redrive,
        "re-run a failed run from the step that failed, on the current definition",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--now", metavar="ISO", help="business time")

    p = command(
        commands,
        "erase-event",
        operate.cmd_erase_event,
        "erase a domain event and every copy derived from it; runs that need it fail",
    )
    p.add_argument("event_id", metavar="EVENT_ID", help="the EventBridge id it was stored under")
    p.add_argument("--tenant", required=True, metavar="T", help="tenant id (UUID)")
    p.add_argument("--reason", metavar="TEXT", help="recorded on the runs it ends")
    p.add_argument("--now", metavar="ISO", help="business time")

    p = command(
        commands,
        "graph",
        operate.cmd_graph,
        "draw a workflow as a flowchart, with a run's path and position when given",
    )
    p.add_argument("workflow", metavar="WORKFLOW")
    p.add_argument("--run", metavar="RUN_ID", help="mark this run's path and position")
    p.add_argument("--tenant", metavar="T", help="tenant of --run (UUID)")
    p.add_argument("--format", choices=["mermaid", "png"], default="mermaid")
    p.add_argument("--output", "-o", metavar="FILE", help="write here (png: required)")

    p = command(
        commands,
        "doctor",
        operate.cmd_doctor,
        "check the engine's invariants; exit 1 with what is wrong and how to fix it",
    )
    p.add_argument("--tenant", metavar="T", help="only this tenant's runs (default: all)")
    p.add_argument("--template", metavar="FILE", help="SAM template (default: ./template.yaml)")

    local = commands.add_parser(
        "local", help="the local runtime: send events, let time pass (business time)"
    )
    local_sub = local.add_subparsers(dest="local_command", metavar="SUBCOMMAND")
    local_sub.required = True
    p = command(
        local_sub,
        "put-events",
        local_commands.cmd_put_events,
        "send events the way `aws events put-events` does and run what follows",
    )
    p.add_argument("file", metavar="FILE|-", help="JSON entries or EventBridge events; - = stdin")
    p.add_argument("--now", metavar="ISO", help="move the local clock here first")
    p.add_argument("--template", metavar="FILE", help="SAM template (default: ./template.yaml)")
    p = command(
        local_sub,
        "tick",
        local_commands.cmd_tick,
        "run one scheduled cycle (or one every DURATION until ISO)",
    )
    p.add_argument("--now", metavar="ISO", help="move the local clock here first")
    p.add_argument("--until", metavar="ISO", help="run cycles up to this instant")
    p.add_argument("--every", metavar="DURATION", help="cycle interval with --until, e.g. PT1H")
    p.add_argument("--template", metavar="FILE", help=argparse.SUPPRESS)
    p = command(local_sub, "clock", local_commands.cmd_clock, "show the local clock and queue")
    p = command(local_sub, "mail", local_commands.cmd_mail, "list the mail captured locally")

    p = command(
        commands,
        "demo",
        local_commands.cmd_demo,
        "play the sample workflows end to end on an embedded PostgreSQL (or DATABASE_URL)",
    )
    p.add_argument("--keep", action="store_true", help=argparse.SUPPRESS)
    dlq.register(commands, command)
    return top


class _WarningsTo(logging.Handler):
    """Engine warnings (a webhook refused, a mail retried) as `wfr: warning: ...` lines
    on the stream of the current command."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.stream: TextIO = sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        detail = getattr(record, "detail", None)
        suffix = f" ({detail})" if detail else ""
        print(f"wfr: warning: {record.getMessage()}{suffix}", file=self.stream)


_WARNINGS = _WarningsTo()


def _route_warnings(err: TextIO) -> None:
    _WARNINGS.stream = err
    engine = logging.getLogger("workflow_runner")
    if _WARNINGS not in engine.handlers:
        engine.addHandler(_WARNINGS)


def main(
    argv: Sequence[str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    environ: dict[str, str] | None = None,
) -> int:
    """Run `wfr` with `argv` (default: sys.argv[1:]); return the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    _route_warnings(err)
    ctx = Context(args, Output(out, err, bool(args.json)), dict(environ or os.environ))
    try:
        handler: Handler = args.handler
        return handler(ctx)
    except (UsageError, InvalidInput) as error:
        print(f"wfr: error: {error}", file=err)
        return 2
    except (RunNotFound, UnknownWorkflow, WorkflowDefinitionError) as error:
        print(f"wfr: error: {error}", file=err)
        return 1
    except StoreError as error:
        print(f"wfr: error: {error}", file=err)
        return 1
    except WorkflowRunnerError as error:
        print(f"wfr: error: {error}", file=err)
        return 1
    except KeyboardInterrupt:
        print("wfr: interrupted", file=err)
        return 130
    finally:
        ctx.close()
