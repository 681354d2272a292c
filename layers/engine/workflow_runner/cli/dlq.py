"""`wfr dlq redrive`: send dead-lettered events and resume requests back to their queue.

    wfr dlq redrive --queue-url "$TRIGGER_DLQ_URL"     # the stack's TriggerDeadLetterQueueUrl

Needs AWS credentials (the usual boto3 chain) and boto3 (`pip install
'workflow-runner[lambda]'`); the database is not touched. See workflow_runner.aws.dlq.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .context import Context, UsageError


def register(commands: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `wfr dlq redrive` to the command parsers."""
    dlq = commands.add_parser("dlq", help="dead-letter queues of a deployed stack (AWS)")
    sub = dlq.add_subparsers(dest="dlq_command", metavar="SUBCOMMAND")
    sub.required = True
    p = command(
        sub,
        "redrive",
        cmd_redrive,
        "send a DLQ's messages back to the queue they came from, keeping their ids",
    )
    p.add_argument("--queue-url", required=True, metavar="URL", help="the dead-letter queue")
    p.add_argument(
        "--to", metavar="URL", help="destination queue (default: the DLQ's one source queue)"
    )
    p.add_argument("--max", type=int, metavar="N", help="move at most N messages")
    p.add_argument(
        "--dry-run", action="store_true", help="show what one batch would move, move nothing"
    )
    p.add_argument("--region", metavar="R", help="AWS region (default: the boto3 chain's)")


def cmd_redrive(ctx: Context) -> int:
    """Move the messages; exit 1 when some had to be left in the DLQ."""
    from ..aws.dlq import redrive

    args = ctx.args
    if args.max is not None and args.max < 1:
        raise UsageError("--max must be at least 1")
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError("wfr dlq needs boto3: pip install 'workflow-runner[lambda]'") from None
    sqs = boto3.client("sqs", region_name=args.region) if args.region else boto3.client("sqs")
    result = redrive(
        sqs, args.queue_url, destination_url=args.to, limit=args.max, dry_run=args.dry_run
    )
    if ctx.output.as_json:
        ctx.output.json(result.as_json())
    else:
        verb = "would move" if result.dry_run else "moved"
        ctx.output.line(f"{verb} {result.moved} message(s) to {result.destination_url}")
        for message_id, why in result.left:
            ctx.output.line(f"left {message_id} in the DLQ: {why}")
    return 1 if result.left else 0
