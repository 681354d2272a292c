"""PostgreSQL storage: the only package that talks to the database driver."""

from __future__ import annotations

from .children import ChildOutcome, ChildRow, ClaimedJoin, JoinCount, NewChild
from .console import PendingKey, RunKey, RunQuery
from .database import Store, connect
from .erasure import Relation
from .inbox import CandidateEvent, InboxEvent
from .local import CapturedMail, QueuedMessage
from .migrate import (
    Migration,
    MigrationTimeout,
    apply_migrations,
    apply_migrations_within,
    pending_migrations,
    schema_sql,
)
from .operator import PinnedRunGroup, ProjectionState, RunCheckRow
from .outbox import DispatchStatus, OutboxRow, OutboxSummary
from .pending import DueRow, NewPendingRow, PendingRow, RowsInFlight, WaitingRow
from .results import StoredResults
from .runs import RunSummary
from .sql import Sql, is_transient
from .streams import NewEvent, StoredEvent
from .tasks import ClaimedTask, NewTask, TaskRow, TaskStatus

__all__ = [
    "CandidateEvent",
    "CapturedMail",
    "ChildOutcome",
    "ChildRow",
    "ClaimedJoin",
    "ClaimedTask",
    "DispatchStatus",
    "DueRow",
    "InboxEvent",
    "JoinCount",
    "Migration",
    "MigrationTimeout",
    "NewChild",
    "NewEvent",
    "NewPendingRow",
    "NewTask",
    "OutboxRow",
    "OutboxSummary",
    "PendingKey",
    "PendingRow",
    "PinnedRunGroup",
    "ProjectionState",
    "QueuedMessage",
    "Relation",
    "RowsInFlight",
    "RunCheckRow",
    "RunKey",
    "RunQuery",
    "RunSummary",
    "Sql",
    "Store",
    "StoredEvent",
    "StoredResults",
    "TaskRow",
    "TaskStatus",
    "WaitingRow",
    "apply_migrations",
    "apply_migrations_within",
    "connect",
    "is_transient",
    "pending_migrations",
    "schema_sql",
]
