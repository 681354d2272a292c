"""PostgreSQL storage: the only package that talks to the database driver."""

from __future__ import annotations

from .callbacks import CallbackRow, CreatedCallbackRow, NewCallback
from .checkpoints import ProjectionLag
from .children import ChildOutcome, ChildRow, ClaimedJoin, JoinCount, NewChild, UntoldChild
from .console import PendingKey, RunKey, RunQuery
from .database import Store, connect
from .definitions import NewDefinition, StoredDefinition
from .erasure import Relation
from .hosts import HostRow
from .inbox import CandidateEvent, InboxEvent, LookBackStart, NewInboxEvent
from .local import CapturedMail, KeptModule, LoggedLine, QueuedMessage
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
from .purge import InboxPageRow, PurgedRuns
from .results import StoredResults
from .runs import RunSummary
from .sql import Sql, is_transient
from .streams import NewEvent, PassWrite, RunEnd, RunSummaryWrite, StoredEvent
from .tasks import ClaimedTask, NewTask, TaskRow, TaskStatus

__all__ = [
    "CallbackRow",
    "CandidateEvent",
    "CapturedMail",
    "ChildOutcome",
    "ChildRow",
    "ClaimedJoin",
    "ClaimedTask",
    "CreatedCallbackRow",
    "DispatchStatus",
    "DueRow",
    "HostRow",
    "InboxEvent",
    "InboxPageRow",
    "JoinCount",
    "KeptModule",
    "LoggedLine",
    "LookBackStart",
    "Migration",
    "MigrationTimeout",
    "MovedRow",
    "NewCallback",
    "NewChild",
    "NewDefinition",
    "NewEvent",
    "NewInboxEvent",
    "NewPendingRow",
    "NewTask",
    "OutboxRow",
    "OutboxSummary",
    "PassWrite",
    "PendingKey",
    "PendingMark",
    "PendingRow",
    "PinnedRunGroup",
    "ProjectionLag",
    "ProjectionState",
    "PurgedRuns",
    "QueuedMessage",
    "Relation",
    "RowsInFlight",
    "RunCheckRow",
    "RunEnd",
    "RunKey",
    "RunQuery",
    "RunSummary",
    "RunSummaryWrite",
    "Sql",
    "Store",
    "StoredDefinition",
    "StoredEvent",
    "StoredResults",
    "TaskRow",
    "TaskStatus",
    "UnfinishedLookBack",
    "UntoldChild",
    "WaitingRow",
    "apply_migrations",
    "apply_migrations_within",
    "connect",
    "is_transient",
    "pending_migrations",
    "schema_sql",
]
