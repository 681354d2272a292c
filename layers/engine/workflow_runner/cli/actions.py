"""Operator actions from the command line: resume, cancel, redrive.

Each goes through `engine.operator_actions`, so the run's stream records who asked, and
exits non-zero when the requested action did not happen (or the run failed in it). On
a database with a local clock (`wfr local`, `wfr demo`), the pending projection and the
step dispatcher catch up right after, as the functions' nudges do in AWS.
"""

from __future__ import annotations

from typing import Any

from ..engine.operator_actions import (
    cancel_as_operator,
    redrive_as_operator,
    resume_as_operator,
)
from ..local.routes import RoutingError
from ..local.runtime import catch_up_local
from ..timeline import instant
from .context import Context
from .local_commands import print_activity


def catch_up(ctx: Context) -> None:
    """Let the local runtime act on what the action appended (only on a local database)."""
    try:
        activity = catch_up_local(ctx.store(), ctx.registry(), ctx.environ, kept=ctx.kept_code())
    except RoutingError as error:
        ctx.output.warn(
            f"the local projection and dispatcher were not nudged ({error}); "
            "run `wfr local tick` from the project root"
        )
        return
    if activity is not None and not ctx.output.as_json and (activity.events or activity.mail):
        print_activity(ctx.output, ctx.store(), activity)


def _fail(ctx: Context, message: str) -> int:
    ctx.output.error(message)
    return 1


def cmd_resume(ctx: Context) -> int:
    """Resume a suspended run (the ResumeRun operation); print the outcome."""
    run = ctx.run()
    tenant, run_id = run.tenant_id, run.run_id
    action = resume_as_operator(
        ctx.store(),
        tenant,
        run_id,
        ctx.now(),
        ctx.operator(),
        ctx.registry(),
        step_index=ctx.args.step,
        force=ctx.args.force,
        hosts=ctx.kept_code(),
    )
    result = action.result
    payload = {
        "outcome": result.outcome,
        "tenantId": tenant,
        "runId": run_id,
        "stepIndex": result.step_index,
        "wakeAt": result.wake_at,
        "suspendedAt": result.suspended_at,
        "nextWakeAt": result.resumed_wake_at,
        "reason": result.reason,
    }
    if ctx.output.as_json:
        ctx.output.json(payload)
    if action.happened:
        if not ctx.output.as_json:
            text = f"{ctx.output.status(result.outcome)}  run {run_id} step {result.step_index}"
            if result.outcome == "suspended":
                text += (
                    f": now at step {result.suspended_at} until {instant(result.resumed_wake_at)}"
                )
            elif result.reason:
                text += f": {result.reason}"
            ctx.output.line(text)
        catch_up(ctx)
        if result.outcome == "failed":
            why = f" ({result.reason})" if result.reason else ""
            return _fail(
                ctx, f"run {run_id} failed in the resumed pass{why}; see `wfr show {run_id}`"
            )
        return 0
    if result.outcome == "on-kept-version":
        return _fail(
            ctx,
            f"run {run_id} runs on the kept version {result.kept_on}, which has its "
            "definition; nothing was resumed here: resume it through the deployed "
            "ResumeRun function, which hands it to that version",
        )
    if result.outcome == "not-due":
        return _fail(
            ctx,
            f"run {run_id} is not due until {instant(result.wake_at)}; nothing was resumed "
            "(--force resumes it now)",
        )
    if action.status_before != "waiting":
        return _fail(ctx, f"run {run_id} is {action.status_before}; nothing to resume")
    if action.waiting_at != result.step_index:
        return _fail(
            ctx,
            f"run {run_id} waits at step {action.waiting_at}, not step {result.step_index}; "
            f"nothing was resumed (use --step {action.waiting_at}, or leave --step out)",
        )
    return _fail(ctx, f"run {run_id} was resumed by someone else meanwhile; nothing to do")


def cmd_cancel(ctx: Context) -> int:
    """Cancel a run (exit 1 when it had already completed or failed)."""
    run = ctx.run()
    tenant, run_id = run.tenant_id, run.run_id
    action = cancel_as_operator(ctx.store(), tenant, run_id, ctx.now(), ctx.operator())
    result = action.result
    if ctx.output.as_json:
        ctx.output.json(
            {
                "outcome": result.outcome,
                "tenantId": tenant,
                "runId": run_id,
                "status": result.status,
            }
        )
    if result.outcome == "already-settled":
        return _fail(ctx, f"run {run_id} is already {result.status}; nothing to cancel")
    if not ctx.output.as_json:
        ctx.output.line(f"{ctx.output.status(result.outcome)}  run {run_id}")
    if action.happened:
        catch_up(ctx)
    return 0


def _redrive_json(tenant: str, run_id: str, result: Any) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "tenantId": tenant,
        "runId": run_id,
        "workflowName": result.workflow_name,
        "fromStepIndex": result.from_step_index,
        "path": result.path,
        "definitionFingerprint": result.definition_fingerprint,
        "previousFingerprint": result.previous_fingerprint,
        "stepIndex": result.step_index,
        "wakeAt": result.wake_at,
        "reason": result.reason,
    }


def cmd_redrive(ctx: Context) -> int:
    """Re-run a failed run from the step that failed (exit 1 when it fails again)."""
    run = ctx.run()
    tenant, run_id = run.tenant_id, run.run_id
    action = redrive_as_operator(
        ctx.store(), tenant, run_id, ctx.now(), ctx.operator(), ctx.registry()
    )
    result = action.result
    if ctx.output.as_json:
        ctx.output.json(_redrive_json(tenant, run_id, result))
    else:
        text = f"redriven from step {result.from_step_index}: {ctx.output.status(result.outcome)}"
        if result.outcome == "suspended":
            text += f" at step {result.step_index} until {instant(result.wake_at)}"
        elif result.reason:
            text += f" ({result.reason})"
        ctx.output.line(text)
    catch_up(ctx)
    if result.outcome == "failed":
        why = f" ({result.reason})" if result.reason else ""
        return _fail(ctx, f"run {run_id} failed again{why}; see `wfr show {run_id}`")
    return 0
