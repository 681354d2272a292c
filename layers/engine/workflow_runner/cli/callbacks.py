"""`wfr callbacks`: answer a run's callback by hand — complete it, report it failed, send
a heartbeat — as an operator, or locally in place of the outside system; and list
callbacks with their deadlines (a run's, or a tenant's open ones)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..callback_tokens import is_token, tokens_in
from ..engine.callbacks import (
    CallbackCompletion,
    CallbackHeartbeatRecorded,
    CallbackRefused,
    CallbackState,
    complete_callback,
    fail_callback,
    heartbeat_callback,
    open_callbacks,
    run_callbacks,
)
from ..errors import InvalidInput
from ..json_input import parse_json
from ..local.application import find_template, no_template_message
from ..local.routes import RoutingError
from ..local.runtime import Activity, LocalRuntime
from ..storable import DEFAULT_MAX_RESULT_BYTES
from ..timeline import instant
from .context import Context, UsageError, parse_now
from .local_commands import print_activity

Outcome = CallbackCompletion | CallbackHeartbeatRecorded
_HASH = "TOKEN SHA-256"


def add_commands(commands: Any, command: Any) -> None:
    """Register `wfr callbacks complete|fail|heartbeat|list` (`command` adds one)."""
    group = commands.add_parser(
        "callbacks", help="answer a callback by hand (complete, fail, heartbeat), or list them"
    )
    sub = group.add_subparsers(dest="callbacks_command", metavar="SUBCOMMAND")
    sub.required = True
    p = command(
        sub,
        "complete",
        cmd_complete,
        "complete the callback a token belongs to, as the callback endpoint does",
    )
    _token_arguments(p)
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument(
        "--payload", metavar="JSON", help="the payload, e.g. '{\"ok\": true}' (null: none)"
    )
    payload.add_argument("--payload-file", metavar="FILE|-", help="read the payload from a file")
    p = command(sub, "fail", cmd_fail, "report that the work a callback stands for failed (…/fail)")
    _token_arguments(p)
    p.add_argument(
        "--error", required=True, metavar="NAME", help="the error name, e.g. PaymentDeclined"
    )
    p.add_argument("--message", metavar="TEXT", help="what happened (logged, never stored)")
    p = command(sub, "heartbeat", cmd_heartbeat, "a callback's heartbeat (…/heartbeat)")
    _token_arguments(p)
    p = command(
        sub,
        "list",
        cmd_list,
        "a run's callbacks, or a tenant's open ones, with deadlines (never their tokens)",
    )
    p.add_argument("--run", metavar="RUN_ID", help="run id or unique prefix")
    p.add_argument("--tenant", metavar="T", help="tenant id (UUID): its open callbacks")


def _token_arguments(p: Any) -> None:
    p.add_argument("token", metavar="TOKEN", help="the token (wfrcb_...), or the link holding it")
    p.add_argument(
        "--now", metavar="ISO", help="business time (on a local database: move its clock)"
    )
    p.add_argument("--template", metavar="FILE", help=argparse.SUPPRESS)


def _token(raw: str) -> str:
    """The token itself, from a token or a text holding one (a link)."""
    if is_token(raw):
        return raw
    found = tokens_in(raw)
    if len(found) == 1:
        return found[0]
    # An unknown token is refused by the engine alike, with the same words.
    return raw


def _payload(ctx: Context) -> Any:
    if ctx.args.payload is not None:
        text, where = str(ctx.args.payload), "--payload"
    else:
        name = str(ctx.args.payload_file)
        where = f"--payload-file {name}"
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as error:
            raise UsageError(f"{where}: {error.strerror or error}") from None
    try:
        return parse_json(text, where, max_bytes=DEFAULT_MAX_RESULT_BYTES)
    except InvalidInput as error:
        raise UsageError(str(error)) from None


def _local_runtime(ctx: Context) -> LocalRuntime | None:
    """The local runtime on a local database (its clock moved to --now), else None."""
    store = ctx.store()
    if store.local.clock() is None:
        return None
    template = Path(ctx.args.template) if ctx.args.template else find_template()
    if template is None:
        raise UsageError(no_template_message() + " (--template FILE)")
    runtime = LocalRuntime(
        store, ctx.registry(), template, environ=ctx.environ, kept=ctx.kept_code(True)
    )
    if ctx.args.now:
        target = parse_now(ctx.args.now, "--now")
        if target < runtime.now():
            raise UsageError(
                f"--now {instant(target)} is before the local clock "
                f"({instant(runtime.now())}): local time only moves forward"
            )
        runtime.set_now(target)
    return runtime


def _answer(
    ctx: Context,
    word: str,
    local: Callable[[LocalRuntime], tuple[Outcome, Activity]],
    deployed: Callable[[], Outcome],
) -> Outcome | None:
    """Record an answer or heartbeat: on a local database through the local runtime (what
    follows runs at once), elsewhere through the engine; None (printed) when refused.
    `word`: what it was (completed, failed, heartbeat), its JSON's key says whether it
    happened ("completed" for a completion, "recorded" else, as the endpoint answers)."""
    key = "completed" if word == "completed" else "recorded"
    activity = None
    try:
        runtime = _local_runtime(ctx)
        if runtime is not None:
            outcome, activity = local(runtime)
        else:
            outcome = deployed()
    except CallbackRefused as error:
        if ctx.output.as_json:
            ctx.output.json({key: False, "reason": error.reason, "error": str(error)})
        ctx.output.error(str(error))
        return None
    except InvalidInput as error:
        raise UsageError(str(error)) from None
    except RoutingError as error:
        raise UsageError(str(error)) from None
    if ctx.output.as_json:
        ctx.output.json({key: True, **_outcome_json(outcome, runtime is not None)})
        return outcome
    where = f"run {outcome.run_id} step {outcome.step_index} ({outcome.workflow_name})"
    if isinstance(outcome, CallbackHeartbeatRecorded):
        ctx.output.line(f"{ctx.output.status(word)}  callback of {where}")
        ctx.output.line(f"the callback takes answers until {instant(outcome.deadline)}")
    else:
        ctx.output.line(f"{ctx.output.status(word)}  callback of {where}")
        ctx.output.line(f"answer stored as event {outcome.event_id}")
        if not outcome.run_due:
            ctx.output.line("the run does not await it yet: its await_callback finds it")
        elif runtime is None:
            ctx.output.line("the run resumes at the deployment's next due scan (about a minute)")
    if activity is not None and (activity.events or activity.mail):
        print_activity(ctx.output, ctx.store(), activity)
    return outcome


def _outcome_json(outcome: Outcome, local: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "tenantId": outcome.tenant_id,
        "runId": outcome.run_id,
        "stepIndex": outcome.step_index,
        "workflowName": outcome.workflow_name,
    }
    if isinstance(outcome, CallbackHeartbeatRecorded):
        return {**found, "deadline": outcome.deadline}
    return {
        **found,
        "eventId": outcome.event_id,
        "resumed": local and outcome.run_due,
        "runDue": outcome.run_due,
    }


def cmd_complete(ctx: Context) -> int:
    """Complete a callback; on a local database run the resumed pass at once, elsewhere
    leave it to the deployment (its pending row is due at once: the next due scan)."""
    token, payload = _token(ctx.args.token), _payload(ctx)
    source = ctx.operator().by
    done = _answer(
        ctx,
        "completed",
        lambda rt: rt.complete_callback(token, payload, source),
        lambda: complete_callback(ctx.store(), token, payload, ctx.now(), source),
    )
    return 0 if done is not None else 1


def cmd_fail(ctx: Context) -> int:
    """Report a callback failed; the run resumes as after a completion."""
    token, error, message = _token(ctx.args.token), ctx.args.error, ctx.args.message
    source = ctx.operator().by
    done = _answer(
        ctx,
        "failed",
        lambda rt: rt.fail_callback(token, error, message, source),
        lambda: fail_callback(ctx.store(), token, error, message, ctx.now(), source),
    )
    return 0 if done is not None else 1


def cmd_heartbeat(ctx: Context) -> int:
    """Send a callback's heartbeat."""
    token = _token(ctx.args.token)
    done = _answer(
        ctx,
        "heartbeat",
        lambda rt: rt.heartbeat_callback(token),
        lambda: heartbeat_callback(ctx.store(), token, ctx.now()),
    )
    return 0 if done is not None else 1


def callbacks_json(found: list[CallbackState]) -> list[dict[str, Any]]:
    """Callbacks as `wfr callbacks list --json` and `wfr runs show --json` show them."""
    return [
        {
            "tenantId": c.row.tenant_id,
            "runId": c.row.run_id,
            "stepIndex": c.row.step_index,
            "path": c.row.path,
            "name": c.row.name,
            "status": c.status,
            "tokenHash": c.row.token_hash,
            "expiresAt": c.row.expires_at,
            "deadline": c.deadline,
            "heartbeatSeconds": c.row.heartbeat_seconds,
            "lastHeartbeatAt": c.row.last_heartbeat_at,
            "completedAt": c.row.completed_at,
            "error": c.row.failed_error,
            "closedReason": c.row.closed_reason,
            "eventId": c.row.completion_event_id,
        }
        for c in found
    ]


def cmd_list(ctx: Context) -> int:
    """A run's callbacks, newest first, or (--tenant without --run) the tenant's open
    ones, soonest deadline first."""
    if ctx.args.run is not None:
        run = ctx.run("run", "--run")
        found = run_callbacks(ctx.store(), run.tenant_id, run.run_id, ctx.now())
        empty = f"run {run.run_id} handed out no callback"
    elif ctx.args.tenant is not None:
        tenant = ctx.tenant()
        assert tenant is not None
        found = open_callbacks(ctx.store(), tenant, ctx.now())
        empty = f"tenant {tenant} has no open callback"
    else:
        raise UsageError("give --run RUN_ID (a run's callbacks) or --tenant T (its open ones)")
    if ctx.output.as_json:
        ctx.output.json(callbacks_json(found))
        return 0
    ctx.output.table(
        [
            "RUN",
            "STEP",
            "NAME",
            "STATUS",
            "DEADLINE",
            "LAST HEARTBEAT",
            "ANSWERED",
            "TOKEN SHA-256",
        ],
        [
            [
                c.row.run_id[:8],
                c.row.step_index,
                c.row.name or "-",
                c.status + (f" ({c.row.failed_error})" if c.row.failed_error else ""),
                instant(c.deadline) + (" (heartbeat)" if c.deadline < c.row.expires_at else ""),
                instant(c.row.last_heartbeat_at),
                instant(c.row.completed_at),
                c.row.token_hash[:16] + "…",
            ]
            for c in found
        ],
        colours=[None, None, None, "status"],
        empty=empty,
    )
    return 0
