"""Where each asynchronous projection stands in the run streams, and how far behind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .sql import Sql


@dataclass(frozen=True)
class ProjectionLag:
    """Run-stream events a projection has not applied (`behind`, counted up to a cap)
    and the `recorded_at` of the oldest of them (None: caught up)."""

    behind: int
    oldest: datetime | None


class CheckpointStore:
    """Where each asynchronous projection stands: (transaction id, position)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def horizon(self) -> str:
        """The transaction id below which a catch-up may read (projection_horizon in
        queries.sql). Must be the first statement of the reading transaction."""
        row = self._sql.one("projection_horizon", {})
        assert row is not None
        return str(row["horizon"])

    def lag(
        self,
        name: str,
        now: datetime,
        cap: int = 100_000,
        quick_cap: int = 100,
        count_after_seconds: float = 5.0,
    ) -> ProjectionLag:
        """How far a projection is behind the run streams at business time `now`.

        `behind` is counted up to `cap` once the oldest unapplied event is
        `count_after_seconds` old, and only up to `quick_cap` before that (a projection
        that keeps up is never far behind, and a long count after every catch-up of a
        busy projection costs more than the catch-up).
        """
        row = (
            self._sql.one(
                "projection_lag",
                {
                    "name": name,
                    "cap": cap,
                    "quick_cap": quick_cap,
                    "count_before": now - timedelta(seconds=count_after_seconds),
                },
            )
            or {}
        )
        return ProjectionLag(int(row.get("behind") or 0), row.get("oldest"))

    def lock(self, name: str, now: datetime) -> tuple[str, int]:
        """Lock (creating it if needed) and return a projection's (xid, position); the
        lock serialises concurrent catch-ups of one projection."""
        self._sql.run("create_checkpoint", {"name": name, "now": now})
        row = self._sql.one("lock_checkpoint", {"name": name})
        assert row is not None
        return str(row["last_xid"]), int(row["last_position"])

    def start_catch_up(self, name: str, now: datetime) -> tuple[str, str, int]:
        """`horizon()` then `lock(name)`, in one round trip: the horizon, and the
        projection's locked (xid, position). The first statements of the reading
        transaction, in that order."""
        horizon, _, (row, *_) = self._sql.batch(
            [
                ("projection_horizon", {}),
                ("create_checkpoint", {"name": name, "now": now}),
                ("lock_checkpoint", {"name": name}),
            ]
        )
        return str(horizon[0]["horizon"]), str(row["last_xid"]), int(row["last_position"])

    def save(self, name: str, xid: str, position: int, now: datetime) -> None:
        """Advance a projection, in the same transaction as its writes."""
        self._sql.run(
            "save_checkpoint",
            {"name": name, "last_xid": xid, "last_position": position, "now": now},
        )
