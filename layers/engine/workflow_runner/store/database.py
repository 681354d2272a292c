"""The Store: named queries over one psycopg connection, with typed results."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..errors import StoreError, TransientStoreError
from .queries import query

# SQLSTATE classes worth a retry: connection exceptions (08), serialization failure and
# deadlock (40001, 40P01), operator intervention such as admin shutdown or failover (57P),
# insufficient resources (53), query canceled by statement timeout (57014).
_TRANSIENT_PREFIXES = ("08", "40001", "40P01", "57P", "53", "57014")


def is_transient(error: BaseException) -> bool:
    """True when a driver error is worth retrying on a fresh transaction."""
    if isinstance(error, TransientStoreError):
        return True
    if isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)) and not isinstance(
        error, psycopg.errors.QueryCanceled
    ):
        sqlstate = getattr(error, "sqlstate", None)
        return sqlstate is None or sqlstate.startswith(_TRANSIENT_PREFIXES)
    sqlstate = getattr(error, "sqlstate", None)
    return bool(sqlstate and sqlstate.startswith(_TRANSIENT_PREFIXES))


@dataclass(frozen=True)
class StoredEvent:
    """One event of a stream as stored."""

    position: int
    tenant_id: str
    stream_id: str
    stream_type: str
    version: int
    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: datetime
    xid: str = ""


@dataclass(frozen=True)
class NewEvent:
    """An event to append."""

    type: str
    payload: dict[str, Any]
    metadata: dict[str, Any] | None = None


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def stored_event(row: dict[str, Any]) -> StoredEvent:
    """A StoredEvent from a wf_events row (metadata and xid optional)."""
    return StoredEvent(
        position=row["position"],
        tenant_id=row["tenant_id"],
        stream_id=row["stream_id"],
        stream_type=row["stream_type"],
        version=row["version"],
        type=row["type"],
        payload=row["payload"],
        metadata=row.get("metadata") or {},
        recorded_at=row["recorded_at"],
        xid=row.get("xid", ""),
    )


class Store:
    """Named engine queries over one connection (autocommit; transactions are explicit).

    Every method that changes data must run inside `transaction()` when it is part of a
    larger atomic unit; a method used alone commits on its own.
    """

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self.conn = conn

    # --- plumbing -----------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction (a savepoint when nested); driver errors become StoreError."""
        try:
            with self.conn.transaction():
                yield
        except psycopg.Error as error:
            raise _wrap(error) from error

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Send the statements inside without waiting for each result: one round trip.

        Only for statements whose results are not read inside the block (a fetch forces
        a round trip); errors surface when the block ends.
        """
        try:
            with self.conn.pipeline():
                yield
        except psycopg.Error as error:
            raise _wrap(error) from error

    def fetch_all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Run a named query (queries*.sql) and return all rows as dicts."""
        try:
            return self.conn.execute(query(name), params).fetchall()
        except psycopg.Error as error:
            raise _wrap(error) from error

    def fetch_one(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """Run a named query and return its first row, or None."""
        try:
            return self.conn.execute(query(name), params).fetchone()
        except psycopg.Error as error:
            raise _wrap(error) from error

    def execute(self, name: str, params: dict[str, Any]) -> int:
        """Run a named query and return the number of rows it touched."""
        try:
            return self.conn.execute(query(name), params).rowcount
        except psycopg.Error as error:
            raise _wrap(error) from error

    def close(self) -> None:
        self.conn.close()

    @property
    def closed(self) -> bool:
        return bool(self.conn.closed) or self.conn.broken

    # --- streams --------------------------------------------------------------

    def append(
        self,
        tenant_id: str,
        stream_id: str,
        stream_type: str,
        expected_version: int,
        events: Sequence[NewEvent],
        recorded_at: datetime,
        check: bool = True,
    ) -> bool:
        """Append events after `expected_version`; False when that version is taken.

        Only the first event can conflict: a concurrent writer that took it blocks us
        on the unique index until it commits, then ON CONFLICT reports the loss. Later
        events are safe because no other writer can see our uncommitted first one.
        `check=False` sends without reading the result (for pipelines): only for an
        append after a version this transaction already holds.
        """
        for offset, event in enumerate(events):
            params = {
                "tenant_id": tenant_id,
                "stream_id": stream_id,
                "stream_type": stream_type,
                "version": expected_version + offset + 1,
                "type": event.type,
                "payload": Jsonb(event.payload),
                "metadata": Jsonb(event.metadata or {}),
                "recorded_at": recorded_at,
            }
            if not check:
                self.execute("append_event", params)
                continue
            row = self.fetch_one("append_event", params)
            if row is None:
                if offset == 0:
                    return False
                raise StoreError(
                    f"stream {stream_id} changed under an append that held its version"
                )
        return True

    def load_stream(self, tenant_id: str, stream_id: str) -> list[StoredEvent]:
        """Every event of a stream, oldest first (empty when it does not exist)."""
        return [
            stored_event(r)
            for r in self.fetch_all("load_stream", {"tenant_id": tenant_id, "stream_id": stream_id})
        ]

    def load_run_stream(
        self, tenant_id: str, run_id: str
    ) -> tuple[list[StoredEvent], dict[str, Any] | None]:
        """A run's events and its trigger event's inbox row (None when not stored)."""
        rows = self.fetch_all("load_run_stream", {"tenant_id": tenant_id, "stream_id": run_id})
        trigger = None
        if rows and rows[0]["trigger_event_id"] is not None:
            first = rows[0]
            trigger = {
                "tenant_id": tenant_id,
                "event_id": first["trigger_event_id"],
                "source": first["trigger_source"],
                "type": first["trigger_type"],
                "detail": first["trigger_detail"],
                "event_time": first["trigger_event_time"],
                "received_at": first["trigger_received_at"],
            }
        return [stored_event(r) for r in rows], trigger

    def stream_version(self, tenant_id: str, stream_id: str) -> int:
        row = self.fetch_one("stream_version", {"tenant_id": tenant_id, "stream_id": stream_id})
        return int(row["version"]) if row else 0

    def read_events_after(
        self, after_xid: str, after_position: int, limit: int
    ) -> list[StoredEvent]:
        """Events after a checkpoint in commit order (see queries.sql)."""
        rows = self.fetch_all(
            "read_events_after",
            {"after_xid": after_xid, "after_position": after_position, "limit": limit},
        )
        return [stored_event(r) for r in rows]

    # --- projections ----------------------------------------------------------

    def lock_checkpoint(self, name: str, now: datetime) -> tuple[str, int]:
        """Lock (creating it if needed) and return a projection's (xid, position)."""
        self.execute("create_checkpoint", {"name": name, "now": now})
        row = self.fetch_one("lock_checkpoint", {"name": name})
        assert row is not None
        return str(row["last_xid"]), int(row["last_position"])

    def save_checkpoint(self, name: str, xid: str, position: int, now: datetime) -> None:
        self.execute(
            "save_checkpoint",
            {"name": name, "last_xid": xid, "last_position": position, "now": now},
        )

    # --- inbox ----------------------------------------------------------------

    def insert_inbox(
        self,
        tenant_id: str,
        event_id: str,
        source: str,
        type: str,
        detail: Any,
        event_time: datetime | None,
        received_at: datetime,
        read: bool = True,
    ) -> bool:
        """Store a domain event; False when it was stored before.

        `read=False` sends without reading the outcome (for pipelines) and returns True.
        """
        params = {
            "tenant_id": tenant_id,
            "event_id": event_id,
            "source": source,
            "type": type,
            "detail": Jsonb(detail),
            "event_time": event_time,
            "received_at": received_at,
        }
        if not read:
            self.execute("insert_inbox", params)
            return True
        row = self.fetch_one("insert_inbox", params)
        return row is not None

    def get_inbox_event(self, tenant_id: str, event_id: str) -> dict[str, Any] | None:
        return self.fetch_one("get_inbox_event", {"tenant_id": tenant_id, "event_id": event_id})

    def claim_inbox_trigger(self, tenant_id: str, event_id: str, now: datetime) -> bool:
        row = self.fetch_one(
            "claim_inbox_trigger", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )
        return row is not None

    def claim_inbox_wakeup(self, tenant_id: str, event_id: str, now: datetime) -> datetime | None:
        """Mark an event as matched against waits; its received_at, or None if it was before."""
        row = self.fetch_one(
            "claim_inbox_wakeup", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )
        return row["received_at"] if row else None

    def awaited_event_candidates(
        self,
        tenant_id: str,
        type: str,
        since: datetime,
        exclude: Sequence[str],
        after_position: int = 0,
        limit: int = 500,
    ) -> list[dict[str, Any]]:
        """Stored events of a type since an instant, by position after `after_position`."""
        return self.fetch_all(
            "awaited_event_candidates",
            {
                "tenant_id": tenant_id,
                "type": type,
                "since": since,
                "exclude": list(exclude),
                "after_position": after_position,
                "limit": limit,
            },
        )

    def register_tenant(self, tenant_id: str, now: datetime) -> None:
        self.execute("register_tenant", {"tenant_id": tenant_id, "now": now})

    def list_tenants(self) -> list[str]:
        return [r["tenant_id"] for r in self.fetch_all("list_tenants", {})]

    def lock_event_type(self, tenant_id: str, type: str) -> None:
        """Transaction-scoped lock on (tenant, awaited event type)."""
        self.fetch_one("lock_event_type", {"tenant_id": tenant_id, "type": type})

    # --- runs -----------------------------------------------------------------

    def upsert_run(
        self,
        tenant_id: str,
        run_id: str,
        workflow_name: str,
        status: str,
        version: int,
        definition_fingerprint: str,
        trigger_event_type: str,
        now: datetime,
    ) -> None:
        self.execute(
            "upsert_run",
            {
                "tenant_id": tenant_id,
                "run_id": run_id,
                "workflow_name": workflow_name,
                "status": status,
                "version": version,
                "definition_fingerprint": definition_fingerprint,
                "trigger_event_type": trigger_event_type,
                "now": now,
            },
        )

    def get_run(self, tenant_id: str, run_id: str) -> dict[str, Any] | None:
        return self.fetch_one("get_run", {"tenant_id": tenant_id, "run_id": run_id})

    def list_runs(
        self,
        tenant_id: str,
        workflow_name: str | None = None,
        status: str | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        return self.fetch_all(
            "list_runs",
            {
                "tenant_id": tenant_id,
                "workflow_name": workflow_name,
                "status": status,
                "limit": limit,
            },
        )

    # --- pending --------------------------------------------------------------

    def upsert_pending(self, row: dict[str, Any]) -> None:
        params = dict(row)
        params["match_expr"] = _jsonb(params.get("match_expr"))
        self.execute("upsert_pending", params)

    def delete_runs_pending(self, runs: Sequence[tuple[str, str]]) -> None:
        """Drop the pending rows of many (tenant_id, run_id) pairs in one statement."""
        self.execute(
            "delete_runs_pending",
            {"tenant_ids": [t for t, _ in runs], "run_ids": [r for _, r in runs]},
        )

    def mark_pending_matched(
        self,
        tenant_id: str,
        run_id: str,
        suspension_version: int,
        event_type: str,
        event_id: str,
        now: datetime,
    ) -> None:
        self.execute(
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

    def waiting_rows_for_event(
        self,
        tenant_id: str,
        type: str,
        received_at: datetime,
        keys: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Unmatched waits an event may wake; `keys` (match.payload_keys) narrows by index."""
        return self.fetch_all(
            "waiting_rows_for_event",
            {
                "tenant_id": tenant_id,
                "type": type,
                "received_at": received_at,
                "keys": None if keys is None else list(keys),
            },
        )

    def due_pending(self, tenant_id: str, now: datetime, limit: int) -> list[dict[str, Any]]:
        return self.fetch_all("due_pending", {"tenant_id": tenant_id, "now": now, "limit": limit})

    def list_pending(
        self, tenant_id: str, before: datetime | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        return self.fetch_all(
            "list_pending", {"tenant_id": tenant_id, "before": before, "limit": limit}
        )

    # --- outbox ---------------------------------------------------------------

    def insert_outbox(
        self,
        tenant_id: str,
        request_id: str,
        run_id: str,
        step_kind: str,
        request: dict[str, Any],
        now: datetime,
    ) -> None:
        self.execute(
            "insert_outbox",
            {
                "tenant_id": tenant_id,
                "request_id": request_id,
                "run_id": run_id,
                "step_kind": step_kind,
                "request": Jsonb(request),
                "now": now,
            },
        )


def _wrap(error: psycopg.Error) -> StoreError:
    message = (
        f"database error ({getattr(error, 'sqlstate', None) or type(error).__name__}): {error}"
    )
    if is_transient(error):
        return TransientStoreError(message)
    return StoreError(message)


def connect(url: str, **kwargs: Any) -> Store:
    """Open a Store on a new autocommit connection.

    Raises:
        TransientStoreError: the server cannot be reached.
    """
    try:
        conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, **kwargs)
    except psycopg.Error as error:
        raise _wrap(error) from error
    return Store(conn)


def dumps(value: Any) -> str:
    """Compact JSON as stored (for size checks)."""
    return json.dumps(value, separators=(",", ":"), default=str)


__all__ = ["NewEvent", "Store", "StoredEvent", "connect", "dumps", "is_transient", "stored_event"]
