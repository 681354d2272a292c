"""`wfr dispatches`: list failed, stuck or pending deliveries across tenants and deliver
failed ones again."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from ..engine.deliveries import RedeliveryRefused, list_deliveries, redeliver
from ..store import OutboxRow
from ..timeline import instant
from .context import Context, UsageError, parse_duration_arg, parse_uuid


def add_commands(commands: Any, command: Any) -> None:
    """Register `wfr dispatches list|redeliver` (`command` adds one subcommand)."""
    group = commands.add_parser(
        "dispatches", help="failed, stuck or pending mail and webhook deliveries"
    )
    sub = group.add_subparsers(dest="dispatches_command", metavar="SUBCOMMAND")
    sub.required = True
    p = command(
        sub,
        "list",
        cmd_list,
        "list fire-and-forget deliveries across tenants, newest first",
    )
    p.add_argument("--status", choices=["failed", "stuck", "pending"], default="failed")
    p.add_argument("--since", metavar="DURATION", default="P1D", help="failed within (P1D)")
    p.add_argument("--tenant", metavar="T", help="only this tenant's (default: all)")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--now", metavar="ISO", help=argparse.SUPPRESS)
    p = command(
        sub,
        "redeliver",
        cmd_redeliver,
        "deliver failed requests again (fresh attempts, same Idempotency-Key)",
    )
    p.add_argument("request_id", nargs="?", metavar="REQUEST_ID")
    p.add_argument("--tenant", metavar="T", help="tenant of REQUEST_ID; filter with --all")
    p.add_argument("--all", action="store_true", help="every failed one (--since, --tenant)")
    p.add_argument("--since", metavar="DURATION", default="P1D", help="with --all (P1D)")
    p.add_argument("--now", metavar="ISO", help="business time")


def _since(ctx: Context) -> timedelta:
    return parse_duration_arg(ctx.args.since, "--since")


def _row_json(row: OutboxRow) -> dict[str, Any]:
    return {
        "tenantId": row.tenant_id,
        "requestId": row.request_id,
        "runId": row.run_id,
        "stepKind": row.step_kind,
        "status": row.status,
        "reason": row.failure_reason,
        "error": row.last_error,
        "attempts": row.attempts,
        "createdAt": row.created_at,
        "settledAt": row.settled_at,
        "nextAttemptAt": row.next_attempt_at,
    }


def cmd_list(ctx: Context) -> int:
    """Deliveries by status across tenants."""
    if ctx.args.limit < 1:
        raise UsageError("--limit must be at least 1")
    rows = list_deliveries(
        ctx.store(),
        ctx.args.status,
        ctx.now(),
        since=_since(ctx),
        tenant_id=ctx.tenant(required=False),
        limit=ctx.args.limit,
    )
    if ctx.output.as_json:
        ctx.output.json([_row_json(r) for r in rows])
        return 0
    ctx.output.table(
        ["REQUEST", "TENANT", "RUN", "KIND", "STATUS", "ATTEMPTS", "ERROR", "WHEN"],
        [
            [
                r.request_id,
                r.tenant_id[:8],
                r.run_id[:8],
                r.step_kind,
                r.status + (f" ({r.failure_reason})" if r.failure_reason else ""),
                r.attempts,
                r.last_error or "-",
                instant(r.settled_at or r.next_attempt_at),
            ]
            for r in rows
        ],
        colours=[None, None, None, None, "status"],
        empty=f"no {ctx.args.status} deliveries",
    )
    return 0


def cmd_redeliver(ctx: Context) -> int:
    """Deliver one failed request, or every failed one matching the filters, again."""
    store, now = ctx.store(), ctx.now()
    if ctx.args.all == (ctx.args.request_id is not None):
        raise UsageError("give REQUEST_ID (with --tenant) or --all")
    if ctx.args.all:
        targets = [
            (r.tenant_id, r.request_id)
            for r in list_deliveries(
                store, "failed", now, _since(ctx), ctx.tenant(required=False), limit=10_000
            )
        ]
    else:
        tenant = ctx.tenant()
        assert tenant is not None
        targets = [(tenant, parse_uuid(ctx.args.request_id, "REQUEST_ID"))]
    done: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for tenant, request_id in targets:
        try:
            result = redeliver(store, tenant, request_id, now)
            done.append({"tenantId": tenant, "requestId": request_id, "runId": result.run_id})
        except RedeliveryRefused as error:
            refused.append({"tenantId": tenant, "requestId": request_id, "reason": str(error)})
    if ctx.output.as_json:
        ctx.output.json({"redelivered": done, "refused": refused})
    else:
        for item in done:
            ctx.output.line(f"{ctx.output.status('ok')}  redelivering {item['requestId']}")
        for item in refused:
            print(f"wfr: error: {item['reason']}", file=ctx.output.err)
        if not targets:
            ctx.output.line("no failed deliveries match")
    return 1 if refused else 0
