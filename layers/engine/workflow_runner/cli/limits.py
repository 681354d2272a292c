"""`wfr limits` (every limit key with its work in flight and queued), `wfr runs list
--skipped` (triggers a rate limit or a singleton let start nothing), and the lines
`wfr runs show` prints about what holds a run back."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ..flow.views import limit_waits, rate, turns_ahead
from ..store import Store
from ..stream import RunState
from ..timeline import instant
from .context import Context, UsageError
from .render import Output


def add_limits_command(commands: Any, command: Any) -> None:
    """Register `wfr limits` (`command`: app.py's helper)."""
    p = command(
        commands,
        "limits",
        cmd_limits,
        "list flow-control limit keys: their work in flight and queued (of every tenant, or one)",
    )
    p.add_argument("--tenant", metavar="T", help="only this tenant's keys (and shared ones)")
    p.add_argument("--workflow", metavar="W", help="only this workflow's keys")
    p.add_argument("--limit", type=int, default=200, help="at most this many (default 200)")
    p.add_argument("--now", metavar="ISO", help="business time (default: see `wfr --help`)")


def add_skipped_option(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--skipped",
        action="store_true",
        default=False if default is None else default,
        help="list trigger events that started nothing (rate limit, singleton), with why",
    )


def cmd_limits(ctx: Context) -> int:
    """Limit keys with their numbers, attempts in flight and work queued."""
    args = ctx.args
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    now = ctx.now()
    rows = ctx.store().flow.limits(
        now, tenant_id=ctx.tenant(required=False), workflow=args.workflow, limit=args.limit
    )
    if ctx.output.as_json:
        ctx.output.json(
            [
                {
                    "key": r.flow_key,
                    "kind": r.kind,
                    "limit": r.limit,
                    "periodMs": r.period_ms or None,
                    "burst": r.burst,
                    "tenantId": r.tenant_id,
                    "workflowName": r.workflow_name,
                    "step": r.step_key,
                    "keyValue": r.key_value,
                    "inFlight": r.in_flight,
                    "queued": r.queued + turns_ahead(r, now),
                    "oldestQueuedAt": r.oldest_queued_at,
                    "nextTurn": r.next_turn if r.kind == "throttle" else None,
                }
                for r in rows
            ]
        )
        return 0
    ctx.output.table(
        ["KIND", "LIMIT", "WORKFLOW", "KEY", "TENANT", "IN FLIGHT", "QUEUED", "OLDEST"],
        [
            [
                r.kind,
                rate(r),
                f"{r.workflow_name}/{r.step_key}" if r.step_key else r.workflow_name,
                r.key_value or "-",
                r.tenant_id[:8] if r.tenant_id else "all",
                r.in_flight if r.kind == "concurrency" else "-",
                r.queued + turns_ahead(r, now),
                instant(r.oldest_queued_at) if r.oldest_queued_at else "-",
            ]
            for r in rows
        ],
        empty="no limit keys",
    )
    return 0


def cmd_runs_skipped(ctx: Context) -> int:
    """Trigger events flow control let start nothing, newest first."""
    args = ctx.args
    skipped = ctx.store().flow.skipped(
        tenant_id=ctx.tenant(required=False), workflow=args.workflow, limit=args.limit
    )
    if ctx.output.as_json:
        ctx.output.json(
            [
                {
                    "tenantId": s.tenant_id,
                    "eventId": s.event_id,
                    "workflowName": s.workflow_name,
                    "reason": s.reason,
                    "detail": s.detail,
                    "runId": s.run_id,
                    "skippedAt": s.skipped_at,
                }
                for s in skipped
            ]
        )
        return 0
    ctx.output.table(
        ["SKIPPED", "TENANT", "WORKFLOW", "EVENT", "REASON"],
        [
            [instant(s.skipped_at), s.tenant_id[:8], s.workflow_name, s.event_id, s.detail]
            for s in skipped
        ],
        empty="no skipped triggers",
    )
    return 0


def show_limit_waits(out: Output, store: Store, state: RunState, now: datetime) -> list[str]:
    """Print (text output) what holds a run back; the same lines, for JSON."""
    lines = [wait.describe() for wait in limit_waits(store, state, now)]
    if not out.as_json:
        for line in lines:
            out.line(line)
    return lines
