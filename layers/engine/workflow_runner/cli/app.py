"""The `wfr` command line: argument parsing, the shared context, errors and exit codes.

Exit codes: 0 success; 1 the command ran but the answer is "no" (run not found,
redrive refused, doctor found problems, database error); 2 bad usage or bad input
(argparse's habit; a workflow definition error too). Errors go to stderr as
`wfr: error: ...`; results to stdout.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..callback_tokens import callback_links, checked_base_url
from ..errors import (
    InvalidInput,
    RunNotFound,
    StoreError,
    UnknownWorkflow,
    WorkflowDefinitionError,
    WorkflowRunnerError,
)
from . import (
    actions,
    callbacks,
    console_command,
    dispatches,
    dlq,
    limits,
    local_commands,
    operate,
    project_commands,
    runs_migrate,
    versions,
)
from .context import Context, Handler, UsageError
from .render import Output


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
            "or input, a workflow definition error included (nothing written)."
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

    runs = command(
        commands,
        "runs",
        operate.cmd_runs_list,
        "list runs (`wfr runs` = `wfr runs list`) or show one run's timeline",
    )
    _runs_list_options(runs, None)
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    p = command(
        runs_sub,
        "list",
        operate.cmd_runs_list,
        "list runs across tenants (or of one), newest change first",
    )
    _runs_list_options(p, argparse.SUPPRESS)
    p = command(runs_sub, "show", operate.cmd_runs_show, "show one run's timeline")
    _run_argument(p)
    p = command(
        runs_sub,
        "migrate",
        runs_migrate.cmd_runs_migrate,
        "move a workflow's waiting runs onto another registered version, where the step "
        "they wait at exists there with the same kind (--dry-run: only say what would move)",
    )
    p.add_argument("--workflow", required=True, metavar="W", help="the workflow")
    p.add_argument(
        "--to-version", type=int, required=True, metavar="N", help="a registered version of W"
    )
    p.add_argument("--tenant", metavar="T", help="only this tenant's runs (default: all)")
    p.add_argument(
        "--map",
        action="append",
        metavar="FROM=TO",
        help="move runs waiting at (or inside) step place FROM to TO, e.g. 2=3 or "
        "4.true.1=5.true.1 (repeatable; default: every run keeps its own place)",
    )
    p.add_argument("--dry-run", action="store_true", help="judge and list; write nothing")
    p.add_argument("--reason", metavar="TEXT", help="recorded on each run's stream")
    p.add_argument("--now", metavar="ISO", help="business time")
    p = command(commands, "show", operate.cmd_runs_show, "show one run's timeline (= runs show)")
    _run_argument(p)

    p = command(
        commands,
        "console",
        console_command.cmd_console,
        "serve the operator console (a web page) on 127.0.0.1 until Ctrl-C",
    )
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any free)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; anything else exposes it to the network "
        "and asks for the operator token)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="also answer requests for this host name or address, or NAME:PORT behind a "
        "proxy (repeatable; WFR_CONSOLE_ALLOW_HOSTS adds comma-separated ones)",
    )
    p.add_argument(
        "--require-token",
        action="store_true",
        help="ask for the operator token on 127.0.0.1 too (always asked for elsewhere; "
        "WFR_CONSOLE_TOKEN sets it, else one is made up and printed)",
    )
    p.add_argument(
        "--allow-actions",
        action="store_true",
        help="enable cancel, resume, redrive (default: read-only)",
    )
    p.add_argument("--template", metavar="FILE", help="SAM template for doctor's routing check")

    limits.add_limits_command(commands, command)

    p = command(
        commands, "pending", operate.cmd_pending, "list pending rows (of every tenant, or one)"
    )
    p.add_argument("--tenant", metavar="T", help="only this tenant (UUID)")
    p.add_argument("--due-before", metavar="ISO", help="only rows due at or before this instant")

    p = command(
        commands,
        "resume",
        actions.cmd_resume,
        "resume a suspended run now (what a ResumeRun invoke does); prints the outcome",
    )
    _run_argument(p)
    p.add_argument("--step", type=int, help="step index of the suspension (default: the open one)")
    p.add_argument("--force", action="store_true", help="resume even if it is not due yet")
    p.add_argument("--reason", metavar="TEXT", help="recorded on the run's stream")
    p.add_argument("--now", metavar="ISO", help="business time (default: see `wfr --help`)")

    p = command(commands, "cancel", actions.cmd_cancel, "cancel a run (it never resumes)")
    _run_argument(p)
    p.add_argument("--reason", metavar="TEXT", help="recorded on the run's stream")
    p.add_argument("--now", metavar="ISO", help="business time")

    p = command(
        commands,
        "redrive",
        actions.cmd_redrive,
        "re-run a failed run from the step that failed, on the current definition",
    )
    _run_argument(p)
    p.add_argument("--reason", metavar="TEXT", help="recorded on the run's stream")
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
        "purge",
        operate.cmd_purge,
        "delete settled runs past their retention (RUN_RETENTION, or a workflow's own) "
        "and the inbox rows nothing reads any more",
    )
    p.add_argument("--dry-run", action="store_true", help="count what would go; write nothing")
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="instead of every retention but 'forever': 30d, 12h, P90D (at least 1h)",
    )
    p.add_argument("--batch", type=int, default=500, metavar="N", help="runs per transaction")
    p.add_argument("--max-batches", type=int, metavar="N", help="stop after N transactions")
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
    p.add_argument("--now", metavar="ISO", help="business time (what is overdue)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="first tell joins about child runs that settled without telling them",
    )

    dispatches.add_commands(commands, command)
    callbacks.add_commands(commands, command)

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
    p = command(
        local_sub,
        "mail",
        local_commands.cmd_mail,
        "show the mail captured locally, bodies included (oldest first)",
    )
    p.add_argument("--to", metavar="ADDRESS", help="only mail to this address")
    p.add_argument("--last", type=int, metavar="N", help="only the last N mails")
    p = command(
        local_sub,
        "sink",
        local_commands.cmd_sink,
        "answer webhooks on this machine and print each as it arrives, until Ctrl-C",
    )
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--answer",
        action="append",
        metavar="PATH=STATUS[,STATUS]",
        help="answer PATH with these statuses first, then 200 (repeatable), e.g. /exports=503",
    )

    p = command(
        commands,
        "demo",
        local_commands.cmd_demo,
        "play the sample workflows end to end on an embedded PostgreSQL (or DATABASE_URL)",
    )
    p.add_argument(
        "--console",
        action="store_true",
        help="then serve the console on the demo's database until Ctrl-C",
    )
    p.add_argument("--port", type=int, default=8080, help="the console's port (default 8080)")
    dlq.register(commands, command)
    versions.register(commands, command)
    project_commands.add_commands(commands, command)
    return top


def _run_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_id", metavar="RUN_ID", help="run id, or a unique prefix of it (4+ hex digits)"
    )
    parser.add_argument(
        "--tenant", metavar="T", help="tenant id (UUID); needed only when the id is in several"
    )


def _runs_list_options(parser: argparse.ArgumentParser, default: Any) -> None:
    """Filters of `wfr runs` and `wfr runs list` (the latter's default to "absent", so
    that options given before `list` survive)."""

    def none(value: Any) -> Any:
        return value if default is None else default

    parser.add_argument("--tenant", metavar="T", default=none(None), help="only this tenant")
    parser.add_argument(
        "--workflow", metavar="W", default=none(None), help="only runs of this workflow"
    )
    parser.add_argument(
        "--version", type=int, metavar="N", default=none(None), help="with --workflow: version N"
    )
    parser.add_argument(
        "--status",
        choices=["running", "waiting", "completed", "failed", "cancelled"],
        default=none(None),
        help="only runs with this status",
    )
    parser.add_argument(
        "--key", metavar="KEY", default=none(None), help="only the run(s) of this idempotency key"
    )
    parser.add_argument(
        "--since",
        metavar="WHEN",
        default=none(None),
        help="changed at or after: an instant, or a duration ago (30m, 2h, 1d, PT1H)",
    )
    parser.add_argument(
        "--until", metavar="WHEN", default=none(None), help="changed at or before (as --since)"
    )
    parser.add_argument(
        "--limit", type=int, default=none(100), help="at most this many (default 100)"
    )
    parser.add_argument(
        "--after", metavar="CURSOR", default=none(None), help="the page after this cursor"
    )
    limits.add_skipped_option(parser, default)


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


def _discard(stream: TextIO) -> None:
    """Point a stream whose reader is gone at /dev/null (when it has a file descriptor)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


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
        # Passes a command runs (resume, redrive) link callbacks to the deployment's endpoint.
        with callback_links(checked_base_url(ctx.environ.get("CALLBACK_BASE_URL"))):
            code = handler(ctx)
        out.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`wfr runs list | head`): stop quietly, as a process
        # killed by SIGPIPE would, without a traceback when Python flushes at exit.
        _discard(out)
        return 141
    except (UsageError, InvalidInput, WorkflowDefinitionError, UnknownWorkflow) as error:
        # An unknown workflow is a name given wrong (its message has the closest ones).
        print(f"wfr: error: {error}", file=err)
        return 2
    except RunNotFound as error:
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
