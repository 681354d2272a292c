"""The statements of the purge of settled runs (engine/purge.py holds the rules)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..stream import DISPATCH_STREAM, RUN_STREAM
from .sql import Sql


@dataclass(frozen=True)
class PurgedRuns:
    """What one batch of purge_runs deleted."""

    runs: int
    candidates: int  # runs it could have taken (at most the limit); the rest were locked
    run_events: int
    dispatch_events: int
    outbox_rows: int
    other_rows: int  # results, consumed events, tasks, callbacks, pending, joins, ...


@dataclass(frozen=True)
class InboxPageRow:
    tenant_id: str
    type: str
    position: int
    received_at: datetime


class PurgeStore:
    """Delete settled runs and unreferenced inbox rows; all in the caller's transaction."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def purge_runs(
        self,
        now: datetime,
        retention_seconds: Mapping[str, float | None],
        default_seconds: float | None,
        limit: int,
        checkpoint: str,
    ) -> PurgedRuns:
        """Lock and delete at most `limit` settled runs past their retention.

        Args:
            retention_seconds: workflow name -> its retention in seconds (None: forever);
                workflows not in it keep `default_seconds` (None: forever).
            checkpoint: the pending projection's checkpoint name; a run with events
                past it is not purged.
        """
        row = self._sql.one(
            "purge_runs",
            {
                "now": now,
                "retention": json.dumps(dict(retention_seconds)),
                "default_seconds": default_seconds,
                "limit": limit,
                "checkpoint": checkpoint,
                "run_stream": RUN_STREAM,
                "dispatch_stream": DISPATCH_STREAM,
            },
        )
        assert row is not None
        return PurgedRuns(
            runs=int(row["runs"]),
            candidates=int(row["candidates"]),
            run_events=int(row["run_events"]),
            dispatch_events=int(row["dispatch_events"]),
            outbox_rows=int(row["outbox_rows"]),
            other_rows=int(row["other_rows"]),
        )

    def inbox_page(self, after: int, limit: int) -> list[InboxPageRow]:
        """The next `limit` inbox rows after position `after`, in position order."""
        rows = self._sql.all("purge_inbox_page", {"after": after, "limit": limit})
        return [
            InboxPageRow(r["tenant_id"], r["type"], int(r["position"]), r["received_at"])
            for r in rows
        ]

    def lock_inbox_types(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Try the wakeup locks of (tenant, type) pairs; the pairs locked (held until the
        transaction ends)."""
        if not pairs:
            return []
        rows = self._sql.all(
            "purge_inbox_lock_types",
            {"tenant_ids": [t for t, _ in pairs], "types": [y for _, y in pairs]},
        )
        return [(r["tenant_id"], r["type"]) for r in rows]

    def delete_inbox(
        self,
        pairs: Sequence[tuple[str, str]],
        after: int,
        through: int,
        cutoff: datetime,
        margin_seconds: float,
    ) -> int:
        """Delete the rows in (after, through] of the locked pairs that nothing may read
        any more (see purge_inbox_delete); how many."""
        if not pairs:
            return 0
        row = self._sql.one(
            "purge_inbox_delete",
            {
                "tenant_ids": [t for t, _ in pairs],
                "types": [y for _, y in pairs],
                "after": after,
                "through": through,
                "cutoff": cutoff,
                "margin_seconds": margin_seconds,
            },
        )
        return int(row["deleted"]) if row else 0
