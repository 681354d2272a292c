"""Operator commands: migrate, runs, pending, resume, cancel, redrive, graph, doctor.

They work against any database URL (Aurora included) and call the same engine
operations the Lambda functions call.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..engine.cancel import cancel_run
from ..engine.doctor import run_doctor
from ..engine.erase import erase_event
from ..engine.passes import load_run
from ..engine.redrive import redrive_run
from ..engine.resume import resume_run
from ..graph import GraphUnavailable, flowchart, run_chart, to_mermaid, to_png
from ..local.routes import template_routes
from ..store import RunSummary, StoredEvent
from ..stream import RUN_STREAM, fold_run
from ..timeline import describe_event, instant, run_timeline
from .context import Context, UsageError, parse_now, parse_uuid


def cmd_migrate(ctx: Context) -> int:
    """Apply pending migrations."""
    applied = ctx.store().migrate()
    names = [f"{m.version:04d}_{m.name}" for m in applied]
    if ctx.output.as_json:
        ctx.output.json({"applied": names})
    elif names:
        for name in names:
            ctx.output.line(f"applied {name}")
    else:
        ctx.output.line("schema is up to date")
    return 0


def _run_json(run: RunSummary) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "tenantId": run.tenant_id,
        "workflowName": run.workflow_name,
        "status": run.status,
        "version": run.version,
        "definitionFingerprint": run.definition_fingerprint,
        "triggerEventType": run.trigger_event_type,
        "startedAt": run.started_at,
        "updatedAt": run.updated_at,
    }


def cmd_runs_list(ctx: Context) -> int:
    """A tenant's runs, newest first."""
    tenant = ctx.tenant()
    assert tenant is not None
    if ctx.args.limit < 1:
        raise UsageError("--limit must be at least 1")
    rows = ctx.store().runs.for_tenant(tenant, ctx.args.workflow, ctx.args.status, ctx.args.limit)
    if ctx.output.as_json:
        ctx.output.json([_run_json(r) for r in rows])
        return 0
    ctx.output.table(
        ["RUN ID", "WORKFLOW", "STATUS", "STARTED", "UPDATED"],
        [
            [r.run_id, r.workflow_name, r.status, instant(r.started_at), instant(r.updated_at)]
            for r in rows
        ],
        colours=[None, None, "status"],
        empty="no runs",
    )
    return 0


def _load_stream(ctx: Context, tenant: str, run_id: str) -> list[StoredEvent]:
    load_run(ctx.store(), tenant, run_id)  # RunNotFound for an unknown run or wrong tenant
    return ctx.store().streams.load(tenant, run_id)


def cmd_runs_show(ctx: Context) -> int:
    """One run's timeline."""
    tenant = ctx.tenant()
    assert tenant is not None
    run_id = parse_uuid(ctx.args.run_id, "RUN_ID")
    events = _load_stream(ctx, tenant, run_id)
    state = fold_run(run_id, tenant, [e.recorded for e in events])
    timeline = run_timeline(ctx.store(), tenant, run_id)
    if ctx.output.as_json:
        ctx.output.json(
            {
                "runId": run_id,
                "tenantId": tenant,
                "workflowName": state.workflow_name,
                "status": state.status,
                "events": [
                    {
                        "version": e.version,
                        "type": e.type,
                        "payload": e.payload,
                        "recordedAt": e.recorded_at,
                    }
                    for e in events
                ],
                # Each fire-and-forget delivery's own stream: requested, attempts, outcome.
                "deliveries": [
                    {
                        "requestId": e.stream_id,
                        "version": e.version,
                        "type": e.type,
                        "payload": e.payload,
                        "recordedAt": e.recorded_at,
                    }
                    for e in timeline
                    if e.stream_type != RUN_STREAM
                ],
            }
        )
        return 0
    out = ctx.output
    out.heading(f"run {run_id}  {state.workflow_name}  {out.status(state.status)}")
    out.line(f"tenant {tenant}")
    out.table(
        ["V", "RECORDED", "EVENT", "DETAIL"],
        [
            [
                e.version if e.stream_type == RUN_STREAM else f"{e.stream_id[:8]}/{e.version}",
                instant(e.recorded_at),
                e.type.removeprefix("workflow."),
                describe_event(e),
            ]
            for e in timeline
        ],
    )
    return 0


def cmd_pending(ctx: Context) -> int:
    """A tenant's pending rows, soonest first."""
    tenant = ctx.tenant()
    assert tenant is not None
    before = parse_now(ctx.args.due_before, "--due-before") if ctx.args.due_before else None
    rows = ctx.store().pending.for_tenant(tenant, before)
    if ctx.output.as_json:
        ctx.output.json(
            [
                {
                    "runId": r.run_id,
                    "stepIndex": r.step_index,
                    "workflowName": r.workflow_name,
                    "suspension": r.suspension_event_type,
                    "wakeAt": r.wake_at,
                    "retryAttempt": r.retry_attempt,
                    "waitEventType": r.wait_event_type,
                    "awaitedEventId": r.awaited_event_id,
                    "suspensionVersion": r.suspension_version,
                    "leasedUntil": r.leased_until,
                }
                for r in rows
            ]
        )
        return 0
    ctx.output.table(
        ["RUN ID", "STEP", "WORKFLOW", "WAITING", "WAKE AT", "DETAIL"],
        [
            [
                r.run_id,
                r.step_index,
                r.workflow_name,
                r.suspension_event_type.removeprefix("workflow."),
                instant(r.wake_at),
                (f"for {r.wait_event_type}" if r.wait_event_type else "")
                + (f" matched {r.awaited_event_id}" if r.awaited_event_id else "")
                + (f"attempt {r.retry_attempt}" if r.retry_attempt else ""),
            ]
            for r in rows
        ],
        empty="no pending rows",
    )
    return 0


def cmd_resume(ctx: Context) -> int:
    """Resume a suspended run (the ResumeRun operation); print the outcome."""
    tenant = ctx.tenant()
    assert tenant is not None
    run_id = parse_uuid(ctx.args.run_id, "RUN_ID")
    store = ctx.store()
    now = ctx.now()
    step = ctx.args.step
    if step is None:
        state = load_run(store, tenant, run_id)
        step = state.suspension.step_index if state.suspension else 0
    result = resume_run(
        store, tenant, run_id, step, now, force=ctx.args.force, registry=ctx.registry()
    )
    payload = {
        "outcome": result.outcome,
        "tenantId": tenant,
        "runId": run_id,
        "stepIndex": step,
        "wakeAt": result.wake_at,
        "suspendedAt": result.suspended_at,
        "nextWakeAt": result.resumed_wake_at,
        "reason": result.reason,
    }
    if ctx.output.as_json:
        ctx.output.json(payload)
    else:
        text = f"{ctx.output.status(result.outcome)}  run {run_id} step {step}"
        if result.outcome == "not-due":
            text += f": due at {instant(result.wake_at)} (use --force to resume now)"
        elif result.outcome == "suspended":
            text += f": now at step {result.suspended_at} until {instant(result.resumed_wake_at)}"
        elif result.reason:
            text += f": {result.reason}"
        ctx.output.line(text)
    return 0


def cmd_cancel(ctx: Context) -> int:
    """Cancel a run."""
    tenant = ctx.tenant()
    assert tenant is not None
    run_id = parse_uuid(ctx.args.run_id, "RUN_ID")
    result = cancel_run(ctx.store(), tenant, run_id, ctx.now(), reason=ctx.args.reason)
    if ctx.output.as_json:
        ctx.output.json(
            {
                "outcome": result.outcome,
                "tenantId": tenant,
                "runId": run_id,
                "status": result.status,
            }
        )
    elif result.outcome == "already-settled":
        print(
            f"wfr: error: run {run_id} is already {result.status}; nothing to cancel",
            file=ctx.output.err,
        )
    else:
        ctx.output.line(f"{ctx.output.status(result.outcome)}  run {run_id}")
    return 1 if result.outcome == "already-settled" else 0


def cmd_erase_event(ctx: Context) -> int:
    """Erase a domain event (GDPR): its payload and every copy, failing runs that need it."""
    tenant = ctx.tenant()
    assert tenant is not None
    result = erase_event(ctx.store(), tenant, ctx.args.event_id, ctx.now(), reason=ctx.args.reason)
    if ctx.output.as_json:
        ctx.output.json(
            {
                "tenantId": tenant,
                "eventId": result.event_id,
                "alreadyErased": result.already_erased,
                "runsRedacted": result.runs,
                "runsFailed": result.failed_runs,
                "eventsRedacted": result.events_redacted,
                "dispatchesCancelled": result.dispatches_cancelled,
            }
        )
        return 0
    state = "was already erased" if result.already_erased else "erased"
    ctx.output.line(f"event {result.event_id} {state}")
    ctx.output.line(
        f"  {len(result.runs)} run(s) redacted, {result.events_redacted} stored event(s) "
        f"redacted, {result.dispatches_cancelled} dispatch(es) cancelled"
    )
    for run_id, reason in sorted(result.failed_runs.items()):
        ctx.output.line(f"  run {run_id} failed: {reason}")
    return 0


def cmd_redrive(ctx: Context) -> int:
    """Re-run a failed run from the step that failed."""
    tenant = ctx.tenant()
    assert tenant is not None
    run_id = parse_uuid(ctx.args.run_id, "RUN_ID")
    result = redrive_run(ctx.store(), tenant, run_id, ctx.now(), registry=ctx.registry())
    if ctx.output.as_json:
        ctx.output.json(
            {
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
        )
        return 0
    text = f"redriven from step {result.from_step_index}: {ctx.output.status(result.outcome)}"
    if result.outcome == "suspended":
        text += f" at step {result.step_index} until {instant(result.wake_at)}"
    elif result.reason:
        text += f" ({result.reason})"
    ctx.output.line(text)
    return 0


def cmd_graph(ctx: Context) -> int:
    """A workflow as a flowchart, with a run's path when given."""
    registry = ctx.registry()
    definition = registry.latest(ctx.args.workflow)
    if ctx.args.run:
        tenant = ctx.tenant(required=False)
        if tenant is None:
            raise UsageError("--run needs --tenant")
        run_id = parse_uuid(ctx.args.run, "--run")
        events = _load_stream(ctx, tenant, run_id)
        state = fold_run(run_id, tenant, [e.recorded for e in events])
        if state.workflow_name != definition.name:
            raise UsageError(
                f"run {run_id} is a run of {state.workflow_name!r}, not {definition.name!r}"
            )
        definition = registry.find(definition.name, state.fingerprint) or definition
        chart = run_chart(ctx.store(), definition, tenant, run_id)
    else:
        chart = flowchart(definition)
    if ctx.args.format == "png":
        if not ctx.args.output:
            raise UsageError("--format png needs --output FILE")
        try:
            data = to_png(chart)
        except GraphUnavailable as error:
            print(f"wfr: error: {error}", file=ctx.output.err)
            return 1
        Path(ctx.args.output).write_bytes(data)
        ctx.output.line(f"wrote {ctx.args.output} ({len(data)} bytes)")
        return 0
    text = to_mermaid(chart)
    if ctx.args.output:
        Path(ctx.args.output).write_text(text)
        ctx.output.line(f"wrote {ctx.args.output}")
    elif ctx.output.as_json:
        ctx.output.json(
            {
                "workflow": definition.name,
                "format": "mermaid",
                "mermaid": text,
                "marks": chart.marks,
            }
        )
    else:
        sys.stdout.flush()
        ctx.output.out.write(text)
    return 0


def cmd_doctor(ctx: Context) -> int:
    """Check the invariants; exit 1 when something is wrong."""
    tenant = ctx.tenant(required=False)
    template = Path(ctx.args.template) if ctx.args.template else None
    if template is not None and not template.is_file():
        raise UsageError(f"--template {template}: no such file")
    routes = template_routes(template, ctx.registry())
    report = run_doctor(ctx.store(), ctx.registry(), tenant, routes, ctx.now())
    if ctx.output.as_json:
        ctx.output.json(report.to_json())
    else:
        out = ctx.output
        for check in report.checks:
            out.line(f"{out.status(check.status):<8}  {check.name}: {check.summary}")
            for item in check.items[:20]:
                out.line(f"          - {item}")
            if len(check.items) > 20:
                out.line(f"          … and {len(check.items) - 20} more")
            if check.fix and check.status != "ok":
                out.line(f"          fix: {check.fix}")
        out.line("")
        out.line(
            out.status("ok") + ": no problems found"
            if report.ok
            else out.status("problem") + f": {report.problems} problem(s) found"
        )
    return 0 if report.ok else 1
