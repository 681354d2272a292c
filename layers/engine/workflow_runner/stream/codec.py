"""Stored event type + payload <-> typed fact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..fast_init import fast_init
from .callbacks import (
    CallbackCompleted,
    CallbackCreated,
    CallbackFailed,
    CallbackHeartbeat,
    StepWaitingForCallback,
)
from .children import ChildrenRequested, ChildrenSettled
from .conditions import StepWaitingForCondition
from .dispatch import DispatchAttemptFailed, Dispatched, DispatchFailed, DispatchRequested
from .flow import FlowHeld
from .operator import OperatorAction, RunMigrated
from .run import (
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunRedriven,
    RunStarted,
    StepEventMatched,
    StepResumed,
)
from .stops import StepStopped
from .suspensions import (
    ChildrenWaiting,
    RetryScheduled,
    StepWaiting,
    StepWaitingForEvent,
    TaskScheduled,
    TasksScheduled,
)
from .tasks import TaskAttemptFailed, TaskCompleted, TaskFailed


@fast_init
@dataclass(frozen=True)
class UnknownFact:
    """An event type this release does not know (a newer release wrote it)."""

    type: str
    payload: Mapping[str, Any]

    def to_payload(self) -> dict[str, Any]:
        return dict(self.payload)


Fact: TypeAlias = (
    RunStarted
    | StepWaiting
    | StepWaitingForEvent
    | RetryScheduled
    | TaskScheduled
    | TasksScheduled
    | ChildrenWaiting
    | ChildrenSettled
    | ChildrenRequested
    | StepStopped
    | TaskAttemptFailed
    | TaskCompleted
    | TaskFailed
    | StepEventMatched
    | StepResumed
    | RunCompleted
    | RunFailed
    | RunCancelled
    | RunRedriven
    | DispatchRequested
    | DispatchAttemptFailed
    | Dispatched
    | DispatchFailed
    | OperatorAction
    | RunMigrated
    | StepWaitingForCallback
    | StepWaitingForCondition
    | CallbackCompleted
    | CallbackFailed
    | CallbackHeartbeat
    | CallbackCreated
    | FlowHeld
    | UnknownFact
)

# Every fact that leaves a run suspended at an open suspension (what a resume claims).
SUSPENDING_FACTS = (
    StepWaiting,
    StepWaitingForEvent,
    RetryScheduled,
    TaskScheduled,
    TasksScheduled,
    ChildrenWaiting,
    StepWaitingForCallback,
    FlowHeld,
    StepWaitingForCondition,
)

_KNOWN: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        RunStarted,
        *SUSPENDING_FACTS,
        ChildrenSettled,
        ChildrenRequested,
        StepStopped,
        TaskAttemptFailed,
        TaskCompleted,
        TaskFailed,
        StepEventMatched,
        StepResumed,
        RunCompleted,
        RunFailed,
        RunCancelled,
        RunRedriven,
        DispatchRequested,
        DispatchAttemptFailed,
        Dispatched,
        DispatchFailed,
        OperatorAction,
        RunMigrated,
        CallbackCompleted,
        CallbackFailed,
        CallbackHeartbeat,
        CallbackCreated,
    )
}


def decode(type: str, payload: Mapping[str, Any]) -> Fact:
    """The typed fact of a stored event (UnknownFact for a type this release lacks)."""
    cls = _KNOWN.get(type)
    if cls is None:
        return UnknownFact(type, payload)
    fact: Fact = cls.from_payload(payload)
    return fact


def type_of(fact: Fact) -> str:
    """The stored event type of a fact."""
    return fact.type if isinstance(fact, UnknownFact) else fact.TYPE
