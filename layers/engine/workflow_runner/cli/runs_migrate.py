"""`wfr runs migrate`: move a workflow's waiting runs onto another registered version.

The engine operation is engine/run_migration.py; this prints what it did (or, with
`--dry-run`, would do) to each run, and exits 0 when every selected run moved (always
for a dry run), 1 when one was refused or lost its race, 2 for bad usage (an unknown
workflow or version, with the closest names; a malformed --map).
"""

from __future__ import annotations

from typing import Any

from ..engine.run_migration import (
    OUTCOME_TEXT,
    MigrationReport,
    MigrationRequest,
    RunMove,
    migrate_runs,
)
from ..engine.step_mapping import parse_mapping
from ..step_paths import describe_path
from .actions import catch_up
from .context import Context


def cmd_runs_migrate(ctx: Context) -> int:
    """Migrate (or judge, --dry-run) the waiting runs of --workflow to --to-version."""
    args = ctx.args
    request = MigrationRequest(
        workflow=args.workflow,
        to_version=args.to_version,
        tenant_id=ctx.tenant(required=False),
        mapping=parse_mapping(args.map or []),
        dry_run=args.dry_run,
    )
    report = migrate_runs(ctx.store(), ctx.registry(), request, ctx.now(), ctx.operator())
    if ctx.output.as_json:
        ctx.output.json(report_json(report))
    else:
        _print(ctx, report)
    if report.with_outcome("moved"):
        catch_up(ctx)
    return 0 if report.dry_run or report.complete else 1


def report_json(report: MigrationReport) -> dict[str, Any]:
    """The report as `--json` prints it (a contract: fields are only added)."""
    return {
        "workflow": report.workflow,
        "toVersion": report.to_version,
        "toFingerprint": report.to_fingerprint,
        "dryRun": report.dry_run,
        "alreadyThere": report.already_there,
        "runs": [
            {
                "tenantId": m.tenant_id,
                "runId": m.run_id,
                "fromVersion": m.from_version,
                "fromFingerprint": m.from_fingerprint,
                "waitingAt": m.waiting,
                "fromPath": m.from_path,
                "toPath": m.to_path,
                "outcome": m.outcome,
                "why": m.why,
                "difference": m.difference,
            }
            for m in report.moves
        ],
    }


def _print(ctx: Context, report: MigrationReport) -> None:
    out = ctx.output
    if report.dry_run:
        out.line(out.paint("dry run: nothing was written", "dim"))
    out.heading(report.summary())
    out.table(
        ["RUN", "TENANT", "WAITS AT", "TO", "OUTCOME"],
        [_row(m) for m in report.moves],
        empty="no waiting run to migrate",
    )
    for m in report.moves:
        if m.why:
            out.line(f"  {m.run_id[:8]} {m.outcome}: {m.why}")
    listed = report.differences()
    if listed:
        out.line("")
        out.line(f"what else differs from v{report.to_version}, where the runs wait now:")
        for where, count, text in listed:
            out.line(f"  {where} ({count} run(s)): {text}")


def _row(m: RunMove) -> list[str]:
    waits = f"v{m.from_version} {m.waiting}" if m.from_version is not None else m.waiting
    return [
        m.run_id[:8],
        m.tenant_id[:8],
        waits,
        describe_path(m.to_path),
        OUTCOME_TEXT[m.outcome],
    ]
