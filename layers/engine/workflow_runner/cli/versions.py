"""`wfr versions prune`: delete the Lambda versions of ResumeRun and StepDispatcher that
no unsettled run needs any more (kept code, definition/hosts.py).

    wfr versions prune --dry-run      # what would go, and why the others stay
    wfr versions prune

Needs the stack's database (DATABASE_URL: which versions registered which definitions,
which runs are unsettled), AWS credentials allowed what the stack's VersionPruningPolicy
grants, and boto3 (`pip install 'workflow-runner[lambda]'`). See aws/versions.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .context import Context, UsageError


def register(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `wfr versions prune` to the command parsers."""
    versions = commands.add_parser(
        "versions", help="the function versions a deployed stack keeps for waiting runs (AWS)"
    )
    sub = versions.add_subparsers(dest="versions_command", metavar="SUBCOMMAND")
    sub.required = True
    p = command(
        sub,
        "prune",
        cmd_prune,
        "delete the ResumeRun and StepDispatcher versions no unsettled run needs",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted, delete nothing"
    )
    p.add_argument(
        "--alias", default="live", metavar="NAME", help="the alias traffic goes through (live)"
    )
    p.add_argument("--region", metavar="R", help="AWS region (default: the boto3 chain's)")


def cmd_prune(ctx: Context) -> int:
    """Delete (or list, --dry-run) the versions; exit 1 when a deletion failed."""
    from ..aws.versions import prune_versions

    args = ctx.args
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(
            "wfr versions needs boto3: pip install 'workflow-runner[lambda]'"
        ) from None
    client = (
        boto3.client("lambda", region_name=args.region) if args.region else boto3.client("lambda")
    )
    report = prune_versions(client, ctx.store(), dry_run=args.dry_run, alias=args.alias)
    out = ctx.output
    if out.as_json:
        out.json(report.as_json())
        return 1 if report.failed else 0
    verb = "would delete" if report.dry_run else "deleted"
    for arn in report.deleted:
        out.line(f"{verb} {arn}")
    for arn, why in report.kept.items():
        out.line(f"kept {arn}: {why}")
    for arn, why in report.failed.items():
        out.error(f"could not delete {arn}: {why}")
    if not (report.deleted or report.kept or report.failed):
        out.line("no function version registered kept code: nothing to prune")
    return 1 if report.failed else 0
