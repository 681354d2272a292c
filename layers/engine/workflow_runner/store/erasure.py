"""The statements of a domain event's erasure (engine/erase.py holds the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..stream import RUN_STREAM, CallbackCompleted, RunStarted, StepEventMatched
from .sql import Sql

Relation = Literal["trigger", "awaited"]


@dataclass(frozen=True)
class OpenDispatch:
    request_id: str
    step_kind: str


class ErasureStore:
    """Blank an event and the copies derived from it; all in the caller's transaction."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def lock_event(self, tenant_id: str, event_id: str) -> tuple[bool, bool]:
        """Lock the inbox event; (found, already erased)."""
        row = self._sql.one(
            "erase_lock_inbox_event", {"tenant_id": tenant_id, "event_id": event_id}
        )
        return (row is not None, row is not None and row["erased_at"] is not None)

    def blank_event(self, tenant_id: str, event_id: str, now: datetime) -> None:
        """Drop the payload and mark the event consumed (a late redelivery does nothing)."""
        self._sql.run(
            "erase_blank_inbox_event", {"tenant_id": tenant_id, "event_id": event_id, "now": now}
        )

    def runs_referencing(self, tenant_id: str, event_id: str) -> list[tuple[str, Relation]]:
        """(run id, relation) of every run naming the event as trigger or matched event."""
        rows = self._sql.all(
            "erase_runs_referencing_event",
            {
                "tenant_id": tenant_id,
                "event_id": event_id,
                "run_stream": RUN_STREAM,
                "started_type": RunStarted.TYPE,
                "matched_type": StepEventMatched.TYPE,
                "callback_type": CallbackCompleted.TYPE,
            },
        )
        return [(r["run_id"], r["relation"]) for r in rows]

    def _runs(self, tenant_id: str, run_ids: Sequence[str]) -> dict[str, object]:
        return {"tenant_id": tenant_id, "run_ids": list(run_ids), "run_stream": RUN_STREAM}

    def redact_run_events(self, tenant_id: str, run_ids: Sequence[str]) -> int:
        """Blank the payload-derived fields of the runs' events; how many were rewritten."""
        return self._sql.run("erase_redact_run_events", self._runs(tenant_id, run_ids))

    def blank_results_and_tasks(self, tenant_id: str, run_ids: Sequence[str]) -> None:
        """Drop the runs' current results and blank their task requests and scopes."""
        self._sql.run("erase_run_results", self._runs(tenant_id, run_ids))
        self._sql.run("erase_run_tasks", self._runs(tenant_id, run_ids))

    def open_dispatches(self, tenant_id: str, run_ids: Sequence[str]) -> list[OpenDispatch]:
        """The runs' requests not delivered yet."""
        rows = self._sql.all("erase_open_dispatches", self._runs(tenant_id, run_ids))
        return [OpenDispatch(r["request_id"], r["step_kind"]) for r in rows]

    def blank_dispatches(self, tenant_id: str, run_ids: Sequence[str]) -> None:
        """Blank every stored request of the runs (open ones become failed)."""
        self._sql.run("erase_blank_dispatches", self._runs(tenant_id, run_ids))

    def blank_local_mail(self, tenant_id: str, run_ids: Sequence[str]) -> None:
        """Blank the mail the local runtime captured for the runs' requests, and the
        exception text its log kept for the runs."""
        self._sql.run("erase_blank_local_mail", self._runs(tenant_id, run_ids))
        self._sql.run("erase_blank_local_log", self._runs(tenant_id, run_ids))
