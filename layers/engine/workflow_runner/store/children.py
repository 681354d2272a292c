"""Child runs: the joins parents asked for (`run_joins`) and their children
(`run_children`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .sql import Sql


@dataclass(frozen=True)
class NewChild:
    item_index: int
    child_run_id: str
    child_key: str
    input: Any
    revive: bool = False  # its join was reopened by a redrive: redrive the run it names


@dataclass(frozen=True)
class ClaimedJoin:
    """A join with children to start, locked for this transaction."""

    tenant_id: str
    join_id: str
    parent_run_id: str
    kind: str
    child_workflow: str
    total: int
    concurrency: int
    next_index: int
    running: int


@dataclass(frozen=True)
class JoinCount:
    """A join after one of its children settled."""

    tenant_id: str
    join_id: str
    parent_run_id: str
    kind: str
    child_workflow: str
    total: int
    settled: int
    failed: int
    catch: bool
    suspension_version: int | None
    notified: bool
    closed: bool
    completion: dict[str, Any] | None = None  # a map's completion policy (stored JSON)


@dataclass(frozen=True)
class ChildOutcome:
    item_index: int
    child_run_id: str
    status: str
    result: Any
    reason: str | None
    started: bool = True  # False: its join was closed before it started (no run)


@dataclass(frozen=True)
class ChildRow:
    """A child of a run, as operators see it."""

    join_id: str
    kind: str
    child_workflow: str
    item_index: int
    child_run_id: str
    status: str
    reason: str | None


@dataclass(frozen=True)
class UntoldChild:
    """A child run that settled while its row in a join still says running."""

    tenant_id: str
    join_id: str
    parent_run_id: str
    item_index: int
    child_run_id: str
    child_status: str


class ChildStore:
    """Write joins and children; claim joins to start; count settled children into
    their joins."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def insert_join(
        self,
        tenant_id: str,
        join_id: str,
        parent_run_id: str,
        kind: str,
        child_workflow: str,
        suspension_version: int | None,
        concurrency: int,
        catch: bool,
        children: Sequence[NewChild],
        now: datetime,
        completion: dict[str, Any] | None = None,
    ) -> None:
        """A join and its children (due to start at once); `completion`: a map's
        completion policy, as stored."""
        self._sql.run(
            "insert_join",
            {
                "tenant_id": tenant_id,
                "join_id": join_id,
                "parent_run_id": parent_run_id,
                "kind": kind,
                "child_workflow": child_workflow,
                "suspension_version": suspension_version,
                "total": len(children),
                "concurrency": concurrency,
                "catch": catch,
                "now": now,
                "completion": None if completion is None else Jsonb(completion),
            },
        )
        rows = [
            {
                "item_index": c.item_index,
                "child_run_id": c.child_run_id,
                "child_key": c.child_key,
                "input": c.input,
            }
            for c in children
        ]
        self._sql.run(
            "insert_children", {"tenant_id": tenant_id, "join_id": join_id, "rows": Jsonb(rows)}
        )

    def claim(
        self, now: datetime, limit: int, served: Sequence[tuple[str, str]] = ()
    ) -> list[ClaimedJoin]:
        """Lock joins with children to start now (call in a transaction), not those
        `served` names ((tenant, join) pairs)."""
        params = {
            "now": now,
            "limit": limit,
            "served_tenants": [tenant for tenant, _ in served],
            "served_joins": [join for _, join in served],
        }
        return [ClaimedJoin(**r) for r in self._sql.all("claim_joins", params)]

    def to_start(self, join: ClaimedJoin, limit: int) -> list[NewChild]:
        rows = self._sql.all(
            "children_to_start",
            {
                "tenant_id": join.tenant_id,
                "join_id": join.join_id,
                "first": join.next_index,
                "limit": limit,
            },
        )
        return [NewChild(**r) for r in rows]

    def mark_running(self, join: ClaimedJoin, item_indexes: Sequence[int], now: datetime) -> None:
        self._sql.run(
            "mark_children_running",
            {
                "tenant_id": join.tenant_id,
                "join_id": join.join_id,
                "item_indexes": list(item_indexes),
                "now": now,
            },
        )

    def store_inputs(
        self,
        tenant_id: str,
        events: Sequence[tuple[str, Any]],
        type: str,
        source: str,
        now: datetime,
    ) -> None:
        """Store children's trigger events ((event id, payload) pairs) in the inbox."""
        rows = [{"event_id": event_id, "detail": detail} for event_id, detail in events]
        self._sql.run(
            "insert_child_events",
            {
                "tenant_id": tenant_id,
                "rows": Jsonb(rows),
                "type": type,
                "source": source,
                "now": now,
            },
        )

    def started(self, join: ClaimedJoin, next_index: int, started: int, now: datetime) -> None:
        self._sql.run(
            "join_started",
            {
                "tenant_id": join.tenant_id,
                "join_id": join.join_id,
                "next_index": next_index,
                "started": started,
                "now": now,
            },
        )

    def joins_with_uncounted(self, limit: int) -> list[tuple[str, str]]:
        """(tenant, join) pairs with settled children not counted yet."""
        rows = self._sql.all("joins_with_uncounted", {"limit": limit})
        return [(r["tenant_id"], r["join_id"]) for r in rows]

    def count_settled(
        self, tenant_id: str, join_id: str, now: datetime
    ) -> tuple[JoinCount, list[ChildOutcome]] | None:
        """Count a join's newly settled children into it (call in a transaction).

        Returns the join after counting and the children counted now (in item order),
        or None when another worker holds the join or nothing was left to count.
        """
        params: dict[str, Any] = {"tenant_id": tenant_id, "join_id": join_id}
        if self._sql.one("lock_join", params) is None:
            return None
        taken = sorted(self._sql.all("take_uncounted", params), key=lambda r: r["item_index"])
        if not taken:
            return None
        failed = sum(1 for r in taken if r["status"] != "completed")
        joined = self._sql.one(
            "join_counted", {**params, "settled": len(taken), "failed": failed, "now": now}
        )
        assert joined is not None
        count = JoinCount(
            tenant_id=tenant_id,
            join_id=join_id,
            parent_run_id=joined["parent_run_id"],
            kind=joined["kind"],
            child_workflow=joined["child_workflow"],
            total=joined["total"],
            settled=joined["settled"],
            failed=joined["failed"],
            catch=joined["catch"],
            suspension_version=joined["suspension_version"],
            notified=joined["notified_at"] is not None,
            closed=joined["closed_at"] is not None,
            completion=joined["completion"],
        )
        counted = [
            ChildOutcome(r["item_index"], r["child_run_id"], r["status"], None, r["reason"])
            for r in taken
        ]
        return count, counted

    def oldest_uncounted(self, tenant_id: str | None = None) -> datetime | None:
        row = self._sql.one("oldest_uncounted", {"tenant_id": tenant_id})
        return row["at"] if row else None

    def mark_notified(self, tenant_id: str, join_id: str, now: datetime) -> bool:
        params = {"tenant_id": tenant_id, "join_id": join_id, "now": now}
        return self._sql.run("mark_join_notified", params) > 0

    def close(self, tenant_id: str, join_ids: list[str], now: datetime) -> list[str]:
        """Joins their parent's end closed (record_passes): their children that never
        started never will; returns the running ones, to cancel."""
        if not join_ids:
            return []
        params = {"tenant_id": tenant_id, "join_ids": join_ids, "now": now}
        self._sql.run("cancel_pending_children", params)
        return [r["child_run_id"] for r in self._sql.all("running_children", params)]

    def stop(self, tenant_id: str, join_id: str, now: datetime) -> list[int]:
        """Close a join its worker stops (call in the transaction that holds its lock):
        nothing more starts. Returns the item indexes of the children that never will."""
        params = {"tenant_id": tenant_id, "join_id": join_id, "now": now}
        return sorted(r["item_index"] for r in self._sql.all("stop_join", params))

    def running_of(self, tenant_id: str, join_id: str) -> list[tuple[int, str]]:
        """The running children of one join: (item index, child run id), in item order."""
        params = {"tenant_id": tenant_id, "join_id": join_id}
        rows = self._sql.all("running_children_of_join", params)
        return [(r["item_index"], r["child_run_id"]) for r in rows]

    def lock_owners(self, tenant_id: str, child_run_id: str) -> None:
        """Wait until no other transaction decides about this child's owners (call in a
        transaction; held until it ends)."""
        self._sql.one("lock_child_owners", {"tenant_id": tenant_id, "child_run_id": child_run_id})

    def owned_elsewhere(self, tenant_id: str, child_run_id: str) -> bool:
        """Whether an open call/map join or a start_workflow join still owns the child."""
        params = {"tenant_id": tenant_id, "child_run_id": child_run_id}
        row = self._sql.one("child_owned_elsewhere", params)
        return bool(row and row["owned"])

    def lock_open_joins(self, tenant_id: str, run_id: str) -> None:
        """Lock a parent's open call/map joins (call in a transaction)."""
        self._sql.all("lock_open_joins", {"tenant_id": tenant_id, "run_id": run_id})

    def reopen(self, tenant_id: str, join_id: str, suspension_version: int, now: datetime) -> int:
        """Reopen a closed join for its parent's redrive (waiting again at the suspension
        at `suspension_version`): its failed and cancelled children are due to start
        again, marked to be revived; completed ones stay counted. Returns its children."""
        params = {
            "tenant_id": tenant_id,
            "join_id": join_id,
            "suspension_version": suspension_version,
            "now": now,
        }
        self._sql.run("revive_children", params)
        row = self._sql.one("reopen_join", params)
        return int(row["total"]) if row else 0

    def outcomes(self, tenant_id: str, join_id: str) -> list[ChildOutcome]:
        rows = self._sql.all("join_outcomes", {"tenant_id": tenant_id, "join_id": join_id})
        return [ChildOutcome(**r) for r in rows]

    def of_run(self, tenant_id: str, run_id: str, limit: int = 1000) -> list[ChildRow]:
        params = {"tenant_id": tenant_id, "run_id": run_id, "limit": limit}
        return [ChildRow(**r) for r in self._sql.all("children_of_run", params)]

    def untold(self, tenant_id: str | None = None, limit: int = 1000) -> list[UntoldChild]:
        """Rows still running whose child run has settled (their join was never told)."""
        params = {"tenant_id": tenant_id, "limit": limit}
        return [UntoldChild(**r) for r in self._sql.all("untold_children", params)]

    def overdue(
        self, before: datetime, tenant_id: str | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Joins whose children were due to start before `before` (no worker ran)."""
        params = {"before": before, "tenant_id": tenant_id, "limit": limit}
        return self._sql.all("overdue_joins", params)

    def next_start(self) -> datetime | None:
        row = self._sql.one("next_join_start", {})
        return row["at"] if row else None
