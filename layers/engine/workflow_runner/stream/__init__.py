"""The run stream, typed: one frozen dataclass per event type and the fold of a run.

Every fact the engine writes to a stream is one of the classes below, and each class
is the one place that turns it into its stored JSON payload (`to_payload`) and back
(`from_payload`). The payload shapes are a storage contract: a release must read what
the previous one wrote (tests/compat replays streams of release 0.1.0), so a field is
only ever added, with a default for streams that lack it. An event type this release
does not know (written by a newer release during a deploy) decodes to `UnknownFact`
and is skipped by the fold.

Two streams live in `wf_events`: a run's stream (`workflow-run`, id = run id) and one
stream per dispatch request (`step-dispatch`, id = request id).
"""

from __future__ import annotations

from .callbacks import (
    CALLBACK_COMPLETED,
    CALLBACK_EVENT_TYPE,
    STEP_WAITING_FOR_CALLBACK,
    CallbackCompleted,
    StepWaitingForCallback,
)
from .children import ChildrenRequested, ChildrenSettled
from .codec import SUSPENDING_FACTS, Fact, UnknownFact, decode, type_of
from .conditions import STEP_WAITING_FOR_CONDITION, StepWaitingForCondition
from .dispatch import DispatchAttemptFailed, Dispatched, DispatchFailed, DispatchRequested
from .fold import RecordedFact, RunState, fold_run
from .names import (
    CHILDREN_REQUESTED,
    CHILDREN_SETTLED,
    CHILDREN_WAITING,
    DISPATCH_ATTEMPT_FAILED,
    DISPATCH_FAILED,
    DISPATCH_REQUESTED,
    DISPATCH_STREAM,
    DISPATCHED,
    NEVER,
    OPERATOR_ACTION,
    RETRY_SCHEDULED,
    RETURNED_FAILURE,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_MIGRATED,
    RUN_REDRIVEN,
    RUN_STARTED,
    RUN_STATUSES,
    RUN_STREAM,
    SETTLED_STATUSES,
    STEP_EVENT_MATCHED,
    STEP_RESUMED,
    STEP_WAITING,
    STEP_WAITING_FOR_EVENT,
    SUSPENSION_TYPES,
    TASK_ATTEMPT_FAILED,
    TASK_COMPLETED,
    TASK_FAILED,
    TASK_SCHEDULED,
    TASKS_SCHEDULED,
    TERMINAL_TYPES,
    Frame,
    Path,
    ResumedBy,
    RunStatus,
)
from .operator import OperatorAction, OperatorActionName, RunMigrated
from .run import (
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunRedriven,
    RunStarted,
    StepEventMatched,
    StepResumed,
)
from .stops import STEP_STOPPED, StepStopped
from .suspensions import (
    ChildrenWaiting,
    ParallelTask,
    RetryScheduled,
    StepWaiting,
    StepWaitingForEvent,
    Suspension,
    SuspensionFact,
    TaskScheduled,
    TasksScheduled,
)
from .tasks import TaskAttemptFailed, TaskCompleted, TaskFailed, TaskOutcome

__all__ = [
    "CALLBACK_COMPLETED",
    "CALLBACK_EVENT_TYPE",
    "CHILDREN_REQUESTED",
    "CHILDREN_SETTLED",
    "CHILDREN_WAITING",
    "DISPATCHED",
    "DISPATCH_ATTEMPT_FAILED",
    "DISPATCH_FAILED",
    "DISPATCH_REQUESTED",
    "DISPATCH_STREAM",
    "NEVER",
    "OPERATOR_ACTION",
    "RETRY_SCHEDULED",
    "RETURNED_FAILURE",
    "RUN_CANCELLED",
    "RUN_COMPLETED",
    "RUN_FAILED",
    "RUN_MIGRATED",
    "RUN_REDRIVEN",
    "RUN_STARTED",
    "RUN_STATUSES",
    "RUN_STREAM",
    "SETTLED_STATUSES",
    "STEP_EVENT_MATCHED",
    "STEP_RESUMED",
    "STEP_STOPPED",
    "STEP_WAITING",
    "STEP_WAITING_FOR_CALLBACK",
    "STEP_WAITING_FOR_CONDITION",
    "STEP_WAITING_FOR_EVENT",
    "SUSPENDING_FACTS",
    "SUSPENSION_TYPES",
    "TASKS_SCHEDULED",
    "TASK_ATTEMPT_FAILED",
    "TASK_COMPLETED",
    "TASK_FAILED",
    "TASK_SCHEDULED",
    "TERMINAL_TYPES",
    "CallbackCompleted",
    "ChildrenRequested",
    "ChildrenSettled",
    "ChildrenWaiting",
    "DispatchAttemptFailed",
    "DispatchFailed",
    "DispatchRequested",
    "Dispatched",
    "Fact",
    "Frame",
    "OperatorAction",
    "OperatorActionName",
    "ParallelTask",
    "Path",
    "RecordedFact",
    "ResumedBy",
    "RetryScheduled",
    "RunCancelled",
    "RunCompleted",
    "RunFailed",
    "RunMigrated",
    "RunRedriven",
    "RunStarted",
    "RunState",
    "RunStatus",
    "StepEventMatched",
    "StepResumed",
    "StepStopped",
    "StepWaiting",
    "StepWaitingForCallback",
    "StepWaitingForCondition",
    "StepWaitingForEvent",
    "Suspension",
    "SuspensionFact",
    "TaskAttemptFailed",
    "TaskCompleted",
    "TaskFailed",
    "TaskOutcome",
    "TaskScheduled",
    "TasksScheduled",
    "UnknownFact",
    "decode",
    "fold_run",
    "type_of",
]
