"""The rows of the pending projection (`workflow_run_pending`) as the engine reads and
writes them (store/pending.py keeps the statements)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..fast_init import fast_init


@fast_init
@dataclass(frozen=True)
class NewPendingRow:
    """A suspension as the projection writes it."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    suspension_event_type: str
    wake_at: datetime
    retry_attempt: int | None
    definition_fingerprint: str | None
    wait_event_type: str | None
    match_expr: dict[str, Any] | None
    suspension_version: int
    lookback_from: datetime | None
    match_key: str | None
    consumed_event_ids: Sequence[str] = ()
    # Where the wait's look-back continues (None: it is done, or not a wait).
    lookback_after: tuple[datetime, int] | None = None


@dataclass(frozen=True)
class PendingMark:
    """An awaited event (or outcome) recorded on a waiting row (mark_matched): the row of
    `suspension_version` takes `event_id` of `event_type` and is due at `at`."""

    tenant_id: str
    run_id: str
    suspension_version: int
    event_type: str
    event_id: str
    at: datetime


@dataclass(frozen=True)
class UnfinishedLookBack:
    """A waiting row whose look-back a projection batch left for the next ones."""

    tenant_id: str
    run_id: str
    step_index: int
    suspension_version: int
    wait_event_type: str
    match_expr: dict[str, Any] | None
    match_key: str | None
    consumed_event_ids: list[str]
    after: tuple[datetime, int]
    match_after: int  # the stream version its match is appended after


@fast_init
@dataclass(frozen=True)
class PendingRow:
    """A pending row as operators see it."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    suspension_event_type: str
    wake_at: datetime
    retry_attempt: int | None
    wait_event_type: str | None
    match_expr: dict[str, Any] | None
    awaited_event_id: str | None
    suspension_version: int
    leased_until: datetime | None


@fast_init
@dataclass(frozen=True)
class DueRow:
    """A row whose time has come (or that an event made due)."""

    tenant_id: str
    run_id: str
    step_index: int
    wake_at: datetime


@dataclass(frozen=True)
class RowsInFlight:
    """A tenant's rows in flight (leased, lease not ended, not yet resumed), each count
    capped at its limit."""

    due: int  # already due: their requests are visible in the queue or being resumed
    total: int  # also those sent ahead, delayed to a later second


@dataclass(frozen=True)
class WaitingRow:
    """An unmatched wait an event of its type may satisfy."""

    run_id: str
    step_index: int
    match_expr: dict[str, Any] | None
    suspension_version: int
    match_after: int  # the stream version its match is appended after (a migration moves it)


@dataclass(frozen=True)
class MovedRow:
    """A row a migration moved, with what a look-back of its wait needs (`wait_event_type`
    None: not a wait for an event)."""

    step_index: int
    suspension_version: int
    wait_event_type: str | None
    match_expr: dict[str, Any] | None
    match_key: str | None
    consumed_event_ids: list[str]
    lookback_from: datetime | None
    matched: bool
