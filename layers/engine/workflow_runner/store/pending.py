"""The pending projection (`workflow_run_pending`): one row per suspended run (D1).

Kept by the pending projection from the run streams; the wakeup marks rows matched,
the due scan and the wakeup lease rows while their resume request is in flight.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ..stream import STEP_RESUMED, TERMINAL_TYPES
from .pending_rows import (
    DueRow,
    MovedRow,
    NewPendingRow,
    PendingMark,
    PendingRow,
    RowsInFlight,
    UnfinishedLookBack,
    WaitingRow,
)
from .sql import Sql, array_literal, runs_params

# Stream events after a suspension that take its row out of flight: the resume's claim,
# or the run's end (a cancel while the request was queued).
_MOVED_PAST_SUSPENSION = sorted({STEP_RESUMED, *TERMINAL_TYPES})


def _pending_record(row: NewPendingRow) -> dict[str, Any]:
    """A row's columns as upsert_pending's JSON record."""
    record = dict(row.__dict__)
    record["consumed_event_ids"] = list(row.consumed_event_ids) or None
    after = record.pop("lookback_after")
    record["lookback_after_instant"] = after[0] if after else None
    record["lookback_after_position"] = after[1] if after else None
    record["lookback_version"] = row.suspension_version if after else None
    return record


class PendingStore:
    """Write, find and lease pending rows; every query carries the tenant."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def upsert(self, row: NewPendingRow) -> None:
        """Write a suspension's row (a newer suspension of the run replaces an older one)."""
        self.upsert_many([row])

    def upsert_many(self, rows: Sequence[NewPendingRow]) -> None:
        """Write suspensions' rows in one statement, as `upsert` each; at most one row
        per (tenant, run, step)."""
        if rows:
            self._sql.run("upsert_pending", {"rows": Jsonb([_pending_record(r) for r in rows])})

    def set_lookback(
        self,
        tenant_id: str,
        run_id: str,
        suspension_version: int,
        after: tuple[datetime, int] | None,
    ) -> None:
        """Move an unfinished look-back's cursor (None: it is done)."""
        self._sql.run(
            "set_pending_lookback",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "suspension_version": suspension_version,
                "after_instant": after[0] if after else None,
                "after_position": after[1] if after else None,
            },
        )

    def unfinished_lookbacks(self, limit: int) -> list[UnfinishedLookBack]:
        """Waiting rows whose look-back is not done yet (any tenant)."""
        rows = self._sql.all("unfinished_lookbacks", {"limit": limit})
        return [
            UnfinishedLookBack(
                tenant_id=r["tenant_id"],
                run_id=r["run_id"],
                step_index=r["step_index"],
                suspension_version=r["suspension_version"],
                wait_event_type=r["wait_event_type"],
                match_expr=r["match_expr"],
                match_key=r["match_key"],
                consumed_event_ids=list(r["consumed_event_ids"] or []),
                after=(r["lookback_after_instant"], r["lookback_after_position"]),
                match_after=r["match_after"],
            )
            for r in rows
        ]

    def migrate(
        self,
        tenant_id: str,
        run_id: str,
        suspension_version: int,
        step_index: int,
        fingerprint: str,
        match_after: int,
    ) -> MovedRow | None:
        """Move a migrated run's row with its suspension (None: no row of it)."""
        row = self._sql.one(
            "migrate_pending",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "suspension_version": suspension_version,
                "step_index": step_index,
                "fingerprint": fingerprint,
                "match_after": match_after,
            },
        )
        if row is None:
            return None
        return MovedRow(
            step_index=row["step_index"],
            suspension_version=row["suspension_version"],
            wait_event_type=row["wait_event_type"],
            match_expr=row["match_expr"],
            match_key=row["match_key"],
            consumed_event_ids=list(row["consumed_event_ids"] or []),
            lookback_from=row["lookback_from"],
            matched=row["awaited_event_id"] is not None,
        )

    def delete_runs(self, runs: Sequence[tuple[str, str]]) -> None:
        """Drop the rows of many (tenant_id, run_id) pairs in one statement."""
        self._sql.run("delete_runs_pending", runs_params(runs))

    def extend_wake(
        self, tenant_id: str, run_id: str, suspension_version: int, wake_at: datetime
    ) -> None:
        """A heartbeat moved a callback wait's deadline to `wake_at` (never earlier; not
        once the wait has its answer)."""
        self._sql.run(
            "extend_pending_wake",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "suspension_version": suspension_version,
                "wake_at": wake_at,
            },
        )

    def mark_matched(
        self,
        tenant_id: str,
        run_id: str,
        suspension_version: int,
        event_type: str,
        event_id: str,
        now: datetime,
    ) -> bool:
        """Record the awaited event on a waiting row and make it due now (False: no row
        of that suspension)."""
        return (
            self._sql.run(
                "mark_pending_matched",
                {
                    "tenant_id": tenant_id,
                    "run_id": run_id,
                    "suspension_version": suspension_version,
                    "event_type": event_type,
                    "event_id": event_id,
                    "now": now,
                },
            )
            > 0
        )

    def waiting_for(
        self,
        tenant_id: str,
        type: str,
        instant: datetime,
        keys: Sequence[str] | None = None,
        event_id: str = "",
    ) -> list[WaitingRow]:
        """Unmatched waits event `event_id` of `instant` may wake (their look-back starts
        at or before it, their run has not consumed it); `keys` (match.payload_keys)
        narrows by index. Ordered by run id."""
        params = _waiting_params(tenant_id, type, [(instant, keys, event_id)])
        return [_waiting_row(r) for r in self._sql.all("waiting_rows_for_events", params)]

    def locked_waiting_for(
        self,
        tenant_id: str,
        type: str,
        events: Sequence[tuple[datetime, Sequence[str] | None, str]],
    ) -> list[list[WaitingRow]]:
        """Take the (tenant, type) lock (InboxStore.lock_type), then read, per event
        (instant, keys, event id), what `waiting_for` reads: the lock and one statement
        for every event (waiting_rows_for_events) in one round trip, the lock first (the
        server runs them in order, so the read sees what was committed before the lock
        was granted), the read on its generic plan (see generic_plans_in_transaction).
        Call inside a transaction."""
        if not events:
            return []
        *_, rows = self._sql.batch(
            [
                ("generic_plans_in_transaction", {}),
                ("lock_event_type", {"tenant_id": tenant_id, "type": type}),
                ("waiting_rows_for_events", _waiting_params(tenant_id, type, events)),
            ]
        )
        found: list[list[WaitingRow]] = [[] for _ in events]
        for r in rows:
            found[r["n"]].append(_waiting_row(r))
        return found

    def mark_matched_many(
        self, tenant_id: str, marks: Sequence[tuple[str, int, str, str]], now: datetime
    ) -> None:
        """Record awaited events on many waiting rows of a tenant, (run_id,
        suspension_version, event type, event id) each, and make them due now, in one
        statement."""
        self._sql.run(
            "mark_pending_matched_many",
            {
                "tenant_id": tenant_id,
                "run_ids": array_literal([m[0] for m in marks]),
                "suspension_versions": array_literal([m[1] for m in marks]),
                "event_types": array_literal([m[2] for m in marks]),
                "event_ids": array_literal([m[3] for m in marks]),
                "now": now,
            },
        )

    def mark_matched_rows(self, marks: Sequence[PendingMark]) -> None:
        """mark_matched for each of `marks` (at most one per run), in one statement."""
        if marks:
            rows = [
                {
                    "tenant_id": m.tenant_id,
                    "run_id": m.run_id,
                    "suspension_version": m.suspension_version,
                    "event_type": m.event_type,
                    "event_id": m.event_id,
                    "at": m.at,
                }
                for m in marks
            ]
            self._sql.run("mark_pending_matched_rows", {"rows": Jsonb(rows)})

    def due(self, tenant_id: str, now: datetime, limit: int) -> list[DueRow]:
        """A tenant's rows due at `now`, oldest first (leases ignored)."""
        rows = self._sql.all("due_pending", {"tenant_id": tenant_id, "now": now, "limit": limit})
        return [DueRow(tenant_id, r["run_id"], r["step_index"], r["wake_at"]) for r in rows]

    def for_tenant(
        self, tenant_id: str, before: datetime | None = None, limit: int = 1000
    ) -> list[PendingRow]:
        """A tenant's rows due before a bound (all when None), soonest first."""
        rows = self._sql.all(
            "list_pending", {"tenant_id": tenant_id, "before": before, "limit": limit}
        )
        return [
            PendingRow(
                tenant_id=tenant_id,
                run_id=r["run_id"],
                step_index=r["step_index"],
                workflow_name=r["workflow_name"],
                suspension_event_type=r["suspension_event_type"],
                wake_at=r["wake_at"],
                retry_attempt=r["retry_attempt"],
                wait_event_type=r["wait_event_type"],
                match_expr=r["match_expr"],
                awaited_event_id=r["awaited_event_id"],
                suspension_version=r["suspension_version"],
                leased_until=r["leased_until"],
            )
            for r in rows
        ]

    def tenants_with_due(self, now: datetime, horizon: datetime) -> list[str]:
        """Tenants with a free row due before `horizon`, the most overdue first."""
        rows = self._sql.all("tenants_with_due_rows", {"now": now, "horizon": horizon})
        return [r["tenant_id"] for r in rows]

    def lease_due(
        self,
        tenant_id: str,
        now: datetime,
        horizon: datetime,
        lease_until: datetime,
        limit: int,
    ) -> list[DueRow]:
        """Lease up to `limit` of a tenant's free rows due before `horizon`, oldest first
        (SKIP LOCKED: concurrent scanners take disjoint rows)."""
        rows = self._sql.all(
            "lease_due_rows",
            {
                "tenant_id": tenant_id,
                "now": now,
                "horizon": horizon,
                "lease_until": lease_until,
                "limit": limit,
            },
        )
        return [DueRow(tenant_id, r["run_id"], r["step_index"], r["wake_at"]) for r in rows]

    def lock_leases(self, tenant_id: str) -> None:
        """Hold the tenant's lease lock until the transaction ends (count, then lease)."""
        self._sql.run("lock_tenant_leases", {"tenant_id": tenant_id})

    def in_flight(
        self, tenant_id: str, now: datetime, due_limit: int, total_limit: int
    ) -> RowsInFlight:
        """Count a tenant's rows in flight at `now`, each count stopping at its limit
        (0: not counted)."""
        row = self._sql.one(
            "tenant_rows_in_flight",
            {
                "tenant_id": tenant_id,
                "now": now,
                "due_limit": due_limit,
                "all_limit": total_limit,
                "moved_types": _MOVED_PAST_SUSPENSION,
            },
        )
        assert row is not None
        return RowsInFlight(due=row["due"], total=row["total"])

    def lease_named(
        self, rows: Sequence[tuple[str, str, int]], now: datetime, lease_until: datetime
    ) -> list[DueRow]:
        """Lease the named rows, (tenant_id, run_id, step_index) each, whose lease is free
        (those not returned are already in flight, or gone), in one statement."""
        found = self._sql.all(
            "lease_named_rows",
            {
                "tenant_ids": array_literal([t for t, _, _ in rows]),
                "run_ids": array_literal([r for _, r, _ in rows]),
                "step_indexes": array_literal([i for _, _, i in rows]),
                "now": now,
                "lease_until": lease_until,
            },
        )
        return [DueRow(r["tenant_id"], r["run_id"], r["step_index"], r["wake_at"]) for r in found]

    def lease_matched(
        self,
        tenant_id: str,
        event_ids: Sequence[str],
        now: datetime,
        lease_until: datetime,
        limit: int,
    ) -> list[DueRow]:
        """Lease up to `limit` rows the tenant's events matched whose lease is free
        (SKIP LOCKED)."""
        found = self._sql.all(
            "lease_matched_rows",
            {
                "tenant_id": tenant_id,
                "event_ids": list(event_ids),
                "now": now,
                "lease_until": lease_until,
                "limit": limit,
            },
        )
        return [DueRow(tenant_id, r["run_id"], r["step_index"], r["wake_at"]) for r in found]

    def release(self, tenant_id: str, run_id: str, step_index: int, lease_until: datetime) -> None:
        """Give a row back (only the lease we set) when the queue refused its request."""
        self._sql.run(
            "release_lease",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "step_index": step_index,
                "lease_until": lease_until,
            },
        )

    def next_wake_at(self, now: datetime) -> datetime | None:
        """The earliest wake time among rows not in flight (a local driver's next stop)."""
        row = self._sql.one("next_wake_at", {"now": now})
        return None if row is None else row["wake_at"]


def _waiting_params(
    tenant_id: str, type: str, events: Sequence[tuple[datetime, Sequence[str] | None, str]]
) -> dict[str, Any]:
    """waiting_rows_for_events' parameters: each event (instant, keys, event id) numbered
    by its place (`n`)."""
    wanted = [
        {
            "n": n,
            "event_id": event_id,
            "instant": instant,
            "keys": None if keys is None else list(keys),
        }
        for n, (instant, keys, event_id) in enumerate(events)
    ]
    return {"tenant_id": tenant_id, "type": type, "events": Jsonb(wanted)}


def _waiting_row(r: dict[str, Any]) -> WaitingRow:
    return WaitingRow(
        r["run_id"], r["step_index"], r["match_expr"], r["suspension_version"], r["match_after"]
    )
