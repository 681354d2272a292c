"""`wfr callbacks`: complete a run's wait_for_callback by hand (an operator, or locally
in place of the outside system), and list the callbacks a run handed out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..callback_tokens import is_token, tokens_in
from ..engine.callbacks import (
    CallbackCompletion,
    CallbackRefused,
    complete_callback,
    run_callbacks,
)
from ..errors import InvalidInput
from ..json_input import parse_json
from ..local.application import find_template, no_template_message
from ..local.routes import RoutingError
from ..local.runtime import LocalRuntime
from ..storable import DEFAULT_MAX_RESULT_BYTES
from ..timeline import instant
from .context import Context, UsageError, parse_now
from .local_commands import print_activity


def add_commands(commands: Any, command: Any) -> None:
    """Register `wfr callbacks complete|list` (`command` adds one subcommand)."""
    group = commands.add_parser(
        "callbacks", help="complete a wait_for_callback by hand, or list a run's callbacks"
    )
    sub = group.add_subparsers(dest="callbacks_command", metavar="SUBCOMMAND")
    sub.required = True
    p = command(
        sub,
        "complete",
        cmd_complete,
        "complete the wait a callback token belongs to, as the callback endpoint does",
    )
    p.add_argument("token", metavar="TOKEN", help="the token (wfrcb_...), or the link holding it")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--payload", metavar="JSON", help="the payload, e.g. '{\"ok\": true}'")
    payload.add_argument("--payload-file", metavar="FILE|-", help="read the payload from a file")
    p.add_argument(
        "--now", metavar="ISO", help="business time (on a local database: move its clock)"
    )
    p.add_argument("--template", metavar="FILE", help=argparse.SUPPRESS)
    p = command(sub, "list", cmd_list, "the callbacks a run handed out (never their tokens)")
    p.add_argument("--run", required=True, metavar="RUN_ID", help="run id or unique prefix")
    p.add_argument("--tenant", metavar="T", help="tenant id (UUID), when the id is in several")


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


def _completion_json(completion: CallbackCompletion, resumed: bool) -> dict[str, Any]:
    return {
        "completed": True,
        "tenantId": completion.tenant_id,
        "runId": completion.run_id,
        "stepIndex": completion.step_index,
        "workflowName": completion.workflow_name,
        "eventId": completion.event_id,
        "resumed": resumed,
    }


def cmd_complete(ctx: Context) -> int:
    """Complete a callback; on a local database run the resumed pass at once, elsewhere
    leave it to the deployment (its pending row is due at once: the next due scan)."""
    token, payload = _token(ctx.args.token), _payload(ctx)
    store = ctx.store()
    source = ctx.operator().by
    local = store.local.clock() is not None
    activity = None
    try:
        if local:
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
            completion, activity = runtime.complete_callback(token, payload, source)
        else:
            completion = complete_callback(store, token, payload, ctx.now(), source)
    except CallbackRefused as error:
        if ctx.output.as_json:
            ctx.output.json({"completed": False, "reason": error.reason, "error": str(error)})
        ctx.output.error(str(error))
        return 1
    except RoutingError as error:
        raise UsageError(str(error)) from None
    if ctx.output.as_json:
        ctx.output.json(_completion_json(completion, local))
        return 0
    where = f"run {completion.run_id} step {completion.step_index} ({completion.workflow_name})"
    ctx.output.line(f"{ctx.output.status('completed')}  callback of {where}")
    ctx.output.line(f"payload stored as event {completion.event_id}")
    if activity is not None and (activity.events or activity.mail):
        print_activity(ctx.output, store, activity)
    elif not local:
        ctx.output.line("the run resumes at the deployment's next due scan (about a minute)")
    return 0


def cmd_list(ctx: Context) -> int:
    """The callbacks a run handed out, newest first."""
    run = ctx.run("run", "--run")
    found = run_callbacks(ctx.store(), run.tenant_id, run.run_id, ctx.now())
    if ctx.output.as_json:
        ctx.output.json(
            [
                {
                    "tenantId": c.row.tenant_id,
                    "runId": c.row.run_id,
                    "stepIndex": c.row.step_index,
                    "path": c.row.path,
                    "status": c.status,
                    "tokenHash": c.row.token_hash,
                    "expiresAt": c.row.expires_at,
                    "completedAt": c.row.completed_at,
                    "eventId": c.row.completion_event_id,
                }
                for c in found
            ]
        )
        return 0
    ctx.output.table(
        ["STEP", "STATUS", "EXPIRES", "COMPLETED", "PAYLOAD EVENT", "TOKEN SHA-256"],
        [
            [
                c.row.step_index,
                c.status,
                instant(c.row.expires_at),
                instant(c.row.completed_at),
                c.row.completion_event_id or "-",
                c.row.token_hash[:16] + "…",
            ]
            for c in found
        ],
        colours=[None, "status"],
        empty=f"run {run.run_id} handed out no callback",
    )
    return 0
