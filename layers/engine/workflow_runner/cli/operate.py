"""Operator commands: migrate, runs, show, pending, erase-event, purge, graph, doctor
(resume, cancel and redrive are in actions.py).

They work against any database URL (Aurora included) and call the same engine
operations the Lambda functions call.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..definition import WorkflowRegistry
from ..definition.branches import shown_child
from ..engine.callbacks import run_callbacks
from ..engine.doctor import run_doctor
from ..engine.erase import erase_event
from ..engine.joins import tell_untold_children
from ..engine.passes import load_run
from ..engine.purge import purge_settled_runs
from ..engine.run_lookup import RunFilter, list_runs, workflow_version_of
from ..graph import flowchart, run_chart
from ..graph_render import GraphUnavailable, to_mermaid, to_png
from ..local.routes import template_routes
from ..retention import default_retention_from_env
from ..store import PendingRow, RunSummary, StoredEvent
from ..stream import RUN_STREAM, fold_run
from ..timeline import (
    duration,
    instant,
    log_json,
    run_timeline,
    shown_payload,
    timeline_entries,
    wake_text,
)
from .callbacks import callbacks_json
from .context import Context, UsageError, parse_duration_arg, parse_now, parse_since
from .limits import cmd_runs_skipped, show_limit_waits


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


def _run_json(run: RunSummary, registry: WorkflowRegistry) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "tenantId": run.tenant_id,
        "workflowName": run.workflow_name,
        "workflowVersion": workflow_version_of(run, registry),
        "status": run.status,
        "version": run.version,
        "definitionFingerprint": run.definition_fingerprint,
        "triggerEventType": run.trigger_event_type,
        "startedAt": run.started_at,
        "updatedAt": run.updated_at,
    }


def cmd_runs_list(ctx: Context) -> int:
    """Runs across tenants (or of one), newest change first, one page at a time."""
    args = ctx.args
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.skipped:
        return cmd_runs_skipped(ctx)
    if args.version is not None and not args.workflow:
        raise UsageError("--version needs --workflow")
    now = ctx.now() if (args.since or args.until) else None
    flt = RunFilter(
        status=args.status,
        workflow=args.workflow,
        workflow_version=args.version,
        tenant_id=ctx.tenant(required=False),
        key=args.key,
        since=parse_since(args.since, "--since", now) if args.since and now else None,
        until=parse_since(args.until, "--until", now) if args.until and now else None,
    )
    registry = ctx.registry()
    page = list_runs(ctx.store(), registry, flt, cursor=args.after, limit=args.limit)
    if ctx.output.as_json:
        ctx.output.json([_run_json(r, registry) for r in page.runs])
        return 0

    def workflow(run: RunSummary) -> str:
        version = workflow_version_of(run, registry)
        return run.workflow_name + (f" v{version}" if version is not None else "")

    headers = ["RUN ID", "TENANT", "WORKFLOW", "STATUS", "STARTED", "UPDATED"]
    rows = [
        [
            r.run_id,
            r.tenant_id[:8],
            workflow(r),
            r.status,
            instant(r.started_at),
            instant(r.updated_at),
        ]
        for r in page.runs
    ]
    if flt.tenant_id is not None:
        headers.pop(1)
        for row in rows:
            row.pop(1)
    ctx.output.table(
        headers, rows, colours=[None] * (len(headers) - 3) + ["status"], empty="no runs"
    )
    if page.next_cursor:
        ctx.output.warn(f"more runs follow: add --after {page.next_cursor}")
    return 0


# Children listed by `runs show` (a map may have thousands).
CHILDREN_SHOWN = 100


def _load_stream(ctx: Context, tenant: str, run_id: str) -> list[StoredEvent]:
    load_run(ctx.store(), tenant, run_id)  # RunNotFound for an unknown run or wrong tenant
    return ctx.store().streams.load(tenant, run_id)


def cmd_runs_show(ctx: Context) -> int:
    """One run's timeline: its stream and its deliveries' outcomes."""
    run = ctx.run()
    tenant, run_id = run.tenant_id, run.run_id
    events = _load_stream(ctx, tenant, run_id)
    state = fold_run(run_id, tenant, [e.recorded for e in events])
    timeline = run_timeline(ctx.store(), tenant, run_id)
    parent = state.started.parent_run_id if state.started else None
    children = ctx.store().children.of_run(tenant, run_id, limit=CHILDREN_SHOWN + 1)
    callbacks = run_callbacks(ctx.store(), tenant, run_id, ctx.now())
    out = ctx.output
    local_log = ctx.store().local.log_of_run(tenant, run_id)
    if ctx.output.as_json:
        # Present only while flow control holds the run (or one of its tasks) back.
        waits = show_limit_waits(out, ctx.store(), state, ctx.now())
        ctx.output.json(
            {
                "runId": run_id,
                "tenantId": tenant,
                "workflowName": state.workflow_name,
                "workflowVersion": workflow_version_of(run, ctx.registry()),
                "status": state.status,
                "events": [_event_json(e) for e in events],
                # Each fire-and-forget delivery's own stream: requested, attempts, outcome.
                "deliveries": [
                    {"requestId": e.stream_id, **_event_json(e)}
                    for e in timeline
                    if e.stream_type != RUN_STREAM
                ],
                "parentRunId": parent,
                **({"limitWaits": waits} if waits else {}),
                "children": [
                    {
                        "runId": c.child_run_id,
                        "workflowName": shown_child(c.child_workflow, c.item_index, c.kind)[0],
                        "index": c.item_index,
                        "step": shown_child(c.child_workflow, c.item_index, c.kind)[1],
                        "status": c.status,
                        "reason": c.reason,
                    }
                    for c in children[:CHILDREN_SHOWN]
                ],
                # The tokens it handed out: where each stands, until when (hashes only).
                "callbacks": callbacks_json(callbacks),
                # The local runtime's log of the run (exception text; local databases only).
                "localLog": [log_json(line) for line in local_log],
            }
        )
        return 0
    out.heading(f"run {run_id}  {state.workflow_name}  {out.status(state.status)}")
    out.line(f"tenant {tenant}")
    if parent:
        out.line(f"child of run {parent}  (wfr runs show {parent})")
    if state.suspension is not None:
        out.line(f"waiting at step {state.suspension.step_index}")
    for c in (c for c in callbacks if c.status == "waiting"):
        which = f"callback {c.row.name!r}" if c.row.name else f"callback of step {c.row.step_index}"
        beat = c.row.last_heartbeat_at
        out.line(
            f"{which} open until {instant(c.deadline)}"
            + (f", last heartbeat {instant(beat)}" if beat else "")
        )
    show_limit_waits(out, ctx.store(), state, ctx.now())
    out.table(
        ["V", "RECORDED", "AFTER", "EVENT", "DETAIL"],
        [
            [
                e.event.version
                if not e.on_dispatch_stream
                else f"{e.event.stream_id[:8]}/{e.event.version}",
                instant(e.event.recorded_at),
                f"+{duration(e.after)}" if e.after else "",
                e.event.type.removeprefix("workflow."),
                e.detail + (f" (took {duration(e.took)})" if e.took else ""),
            ]
            for e in timeline_entries(timeline)
        ],
    )
    if children:
        out.line("")
        out.table(
            ["CHILD RUN", "WORKFLOW", "STEP", "ITEM", "STATUS"],
            [
                [
                    c.child_run_id,
                    *shown_child(c.child_workflow, c.item_index, c.kind),
                    c.item_index,
                    c.status,
                ]
                for c in children[:CHILDREN_SHOWN]
            ],
            colours=[None, None, None, None, "status"],
        )
        if len(children) > CHILDREN_SHOWN:
            out.warn(f"only the first {CHILDREN_SHOWN} children are shown")
    if local_log:
        out.line("")
        out.line(
            out.paint("local log: the text behind the stored errors (this machine only)", "dim")
        )
        out.table(
            ["LOGGED", "MESSAGE", "DETAIL"],
            [[instant(line.logged_at), line.message, line.detail or ""] for line in local_log],
        )
    return 0


def _event_json(e: StoredEvent) -> dict[str, Any]:
    return {
        "version": e.version,
        "type": e.type,
        "payload": shown_payload(e),
        "recordedAt": e.recorded_at,
    }


def cmd_pending(ctx: Context) -> int:
    """Pending rows of a tenant, or of every tenant, soonest first (at most 1000)."""
    tenant = ctx.tenant(required=False)
    before = parse_now(ctx.args.due_before, "--due-before") if ctx.args.due_before else None
    rows: list[PendingRow]
    if tenant is not None:
        rows = ctx.store().pending.for_tenant(tenant, before)
    else:
        rows = ctx.store().console.pending(None, None, before, None, 1000)
    if ctx.output.as_json:
        ctx.output.json(
            [
                {
                    "tenantId": r.tenant_id,
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
        ["RUN ID", "TENANT", "STEP", "WORKFLOW", "WAITING", "WAKE AT", "DETAIL"],
        [
            [
                r.run_id,
                r.tenant_id[:8],
                r.step_index,
                r.workflow_name,
                r.suspension_event_type.removeprefix("workflow."),
                wake_text(r.wake_at),
                " ".join(
                    part
                    for part in (
                        f"for {r.wait_event_type}" if r.wait_event_type else "",
                        f"matched {r.awaited_event_id}" if r.awaited_event_id else "",
                        f"attempt {r.retry_attempt}" if r.retry_attempt else "",
                    )
                    if part
                ),
            ]
            for r in rows
        ],
        empty="no pending rows",
    )
    return 0


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


def cmd_purge(ctx: Context) -> int:
    """Purge settled runs past their retention, in batches, or count them (--dry-run)."""
    now = ctx.now()
    older_than = None
    if ctx.args.older_than is not None:
        older_than = parse_duration_arg(ctx.args.older_than, "--older-than")
    result = purge_settled_runs(
        ctx.store(),
        now,
        registry=ctx.registry(),
        default_retention=default_retention_from_env(ctx.environ),
        older_than=older_than,
        batch_size=ctx.args.batch,
        max_batches=ctx.args.max_batches,
        dry_run=ctx.args.dry_run,
    )
    if ctx.output.as_json:
        ctx.output.json(
            {
                "dryRun": result.dry_run,
                "runs": result.runs,
                "events": result.events,
                "outboxRows": result.outbox_rows,
                "inboxRows": result.inbox_rows,
                "otherRows": result.other_rows,
                "batches": result.batches,
                "moreLeft": result.more_left,
            }
        )
        return 0
    verb = "would purge" if result.dry_run else "purged"
    ctx.output.line(
        f"{verb} {result.runs} run(s): {result.events} stream event(s), "
        f"{result.outbox_rows} delivery row(s), {result.inbox_rows} inbox row(s), "
        f"{result.other_rows} other row(s) in {result.batches} batch(es)"
    )
    if result.more_left:
        ctx.output.line("more is left: run it again (or without --max-batches)")
    return 0


def cmd_graph(ctx: Context) -> int:
    """A workflow as a flowchart, with a run's path when given."""
    registry = ctx.registry()
    definition = registry.latest(ctx.args.workflow)
    if ctx.args.run:
        run = ctx.run("run", "--run")
        tenant, run_id = run.tenant_id, run.run_id
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
    if ctx.args.repair:
        told = tell_untold_children(ctx.store(), tenant, ctx.now())
        if not ctx.output.as_json:
            ctx.output.line(f"repaired: told {told} settled child run(s) to their joins")
    report = run_doctor(
        ctx.store(), ctx.registry(), tenant, routes, ctx.now(), hosts=ctx.kept_code()
    )
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
