"""A run's current step results (`run_results`) and the awaited events it consumed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..fast_init import fast_init
from .sql import Sql, runs_params


@fast_init
@dataclass(frozen=True)
class StoredResults:
    """A run's results: values, awaited references (key -> inbox id or None) and their
    payloads; `missing` names awaited references whose event is no longer stored."""

    values: dict[str, Any]
    awaited_refs: dict[str, str | None]
    missing: list[str]


def result_rows(
    values: Mapping[str, Any], awaited_refs: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """The rows of run_results a pass's results become (record_pass)."""
    return [
        {"key": k, "value": v, "awaited": False, "awaited_event_id": None}
        for k, v in values.items()
    ] + [
        {"key": k, "value": None, "awaited": True, "awaited_event_id": ref}
        for k, ref in awaited_refs.items()
    ]


def stored_results(rows: Sequence[Mapping[str, Any]]) -> StoredResults:
    """StoredResults from rows of the `run_results` query."""
    values: dict[str, Any] = {}
    refs: dict[str, str | None] = {}
    missing: list[str] = []
    for row in rows:
        if row["awaited"]:
            refs[row["key"]] = row["awaited_event_id"]
            values[row["key"]] = row["awaited_detail"]
            if row["awaited_missing"]:
                missing.append(row["key"])
        else:
            values[row["key"]] = row["value"]
    return StoredResults(values, refs, missing)


class ResultStore:
    """Read a run's current results (a pass writes them with its events: record_pass)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def of_run(self, tenant_id: str, run_id: str) -> StoredResults:
        """Every current result of a run, awaited payloads included."""
        return stored_results(self._sql.all("run_results", runs_params([(tenant_id, run_id)])))

    def consume(self, tenant_id: str, run_id: str, event_ids: Sequence[str]) -> None:
        """Remember awaited events the run took, so no later wait of it takes them."""
        if event_ids:
            self._sql.run(
                "consume_events",
                {"tenant_id": tenant_id, "run_id": run_id, "event_ids": list(event_ids)},
            )
