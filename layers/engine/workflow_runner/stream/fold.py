"""The fold of a run stream into where the run stands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from ..definition.completion import CompletionReason, decide
from ..fast_init import fast_init
from .callbacks import (
    CallbackCompleted,
    CallbackFailed,
    CallbackHeartbeat,
    StepWaitingForCallback,
)
from .children import ChildrenSettled
from .codec import SUSPENDING_FACTS, Fact
from .conditions import StepWaitingForCondition
from .flow import FlowHeld
from .names import SETTLED_STATUSES, RunStatus
from .operator import RunMigrated
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
    Suspension,
    TaskScheduled,
    TasksScheduled,
)
from .tasks import TaskCompleted, TaskFailed, TaskOutcome


@fast_init
@dataclass(frozen=True)
class RecordedFact:
    """A fact as read back from a stream: its version and when it was recorded."""

    version: int
    recorded_at: datetime
    fact: Fact


@dataclass
class RunState:
    """What a run stream says about its run, folded from its events."""

    run_id: str
    tenant_id: str
    version: int = 0
    started: RunStarted | None = None
    started_at: datetime | None = None
    status: RunStatus | Literal["missing"] = "missing"
    fingerprint: str = ""
    # the open suspension
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition | FlowHeld | None = (
        None
    )
    suspension_version: int = 0
    # The step indexes the open suspension had before a migration moved it (a resume
    # request sent for one of them is for this very suspension).
    moved_from: tuple[int, ...] = ()
    # The first event that matched the open wait (a callback's payload event included).
    matched_event_id: str | None = None
    # The error name the open callback wait's token answered with (CallbackFailed).
    callback_error: str | None = None
    # The recorded outcomes of the open suspension's task(s), by task id.
    task_outcomes: dict[str, TaskOutcome] = field(default_factory=dict)
    children_settled: ChildrenSettled | None = None  # the open join's children settled
    stopped: StepStopped | None = None  # the open map or parallel ended early
    outcome_recorded_at: datetime | None = None
    last_failure: RunFailed | None = None
    cancel_reason: str | None = None  # why it was cancelled, if it was
    # The trigger event the run started with when it is not RunStarted's (a debounce
    # starts with the last trigger of its key: flow control's FlowHeld names it).
    trigger_override: str | None = None
    # A batch's trigger events (flow control's Batch), in arrival order; () otherwise.
    batch_event_ids: tuple[str, ...] = ()

    @property
    def workflow_name(self) -> str:
        return self.started.workflow_name if self.started else ""

    @property
    def trigger_event_type(self) -> str:
        return self.started.trigger_event_type if self.started else ""

    @property
    def trigger_event_id(self) -> str | None:
        return self.started.trigger_event_id if self.started else None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED_STATUSES

    @property
    def task_outcome(self) -> TaskOutcome | None:
        """The outcome of the open single task (TaskScheduled), once recorded."""
        open_task = self.suspension
        if isinstance(open_task, TaskScheduled):
            return self.task_outcomes.get(open_task.task_id)
        return None

    def waits_for_task(self, task_id: str) -> bool:
        """Whether the open suspension has task `task_id` without its outcome (a stopped
        parallel waits for none: the outcome of an attempt still running is dropped)."""
        open_ = self.suspension
        if self.stopped is not None:
            return False
        if isinstance(open_, TaskScheduled):
            return open_.task_id == task_id and task_id not in self.task_outcomes
        if isinstance(open_, TasksScheduled):
            return open_.task(task_id) is not None and task_id not in self.task_outcomes
        return False

    @property
    def outcome_ready(self) -> bool:
        """Whether a suspension that waits for work (tasks, children) may resume: every
        outcome is recorded, or one failed that the workflow does not catch."""
        open_ = self.suspension
        if isinstance(open_, TaskScheduled):
            return open_.task_id in self.task_outcomes
        if isinstance(open_, TasksScheduled):
            if open_.completion is not None:
                return self.parallel_completion is not None
            if all(t.task_id in self.task_outcomes for t in open_.tasks):
                return True
            return any(
                isinstance(self.task_outcomes.get(t.task_id), TaskFailed) and not t.catch
                for t in open_.tasks
            )
        if isinstance(open_, ChildrenWaiting):
            return self.children_settled is not None
        return False

    @property
    def parallel_completion(self) -> CompletionReason | None:
        """How the open parallel with a completion policy ends on the outcomes recorded
        so far (None: it goes on, or it has no policy). The tasks a redrive kept (their
        results seeded) count as succeeded."""
        open_ = self.suspension
        if not isinstance(open_, TasksScheduled) or open_.completion is None:
            return None
        succeeded = len(open_.keys) - len(open_.tasks)
        failed = 0
        for task in open_.tasks:
            outcome = self.task_outcomes.get(task.task_id)
            if isinstance(outcome, TaskCompleted):
                succeeded += 1
            elif outcome is not None:
                failed += 1
        return decide(open_.completion, len(open_.keys), succeeded, failed)

    def parallel_stop(self) -> StepStopped | None:
        """The stop a parallel records when an outcome makes it due while some of its
        tasks have none (its completion policy decided, or a task failed that it does
        not catch): those tasks are stopped. None: nothing to stop."""
        open_ = self.suspension
        if not isinstance(open_, TasksScheduled) or self.stopped is not None:
            return None
        left = [t.task_key for t in open_.tasks if t.task_id not in self.task_outcomes]
        if not left or not self.outcome_ready:
            return None
        keys = list(open_.keys)
        return StepStopped(
            kind="parallel",
            step_index=open_.step_index,
            path=list(open_.path),
            suspension_version=self.suspension_version,
            # TaskFailedError.reason: a task failed that the parallel does not catch.
            reason=self.parallel_completion or "task_failed",
            cancelled=tuple(keys.index(key) for key in left),
            task_keys=tuple(left),
        )

    @property
    def wake_at(self) -> datetime | None:
        return None if self.suspension is None else self.suspension.due_at

    def _settles_open_callback(
        self, fact: CallbackCompleted | CallbackFailed | CallbackHeartbeat
    ) -> bool:
        """Whether a callback's fact is about the callback wait open now, still without
        an answer (a completion recorded before callbacks could be created names no
        token: its version decides)."""
        open_ = self.suspension
        return (
            fact.run_due
            and isinstance(open_, StepWaitingForCallback)
            and fact.suspension_version == self.suspension_version
            and fact.token_hash in (None, open_.token_hash)
            and self.matched_event_id is None
        )

    def apply(self, recorded: RecordedFact) -> None:
        """Fold one more fact (oldest first)."""
        self.version = recorded.version
        fact = recorded.fact
        if isinstance(fact, RunStarted):
            self.started = fact
            self.started_at = recorded.recorded_at
            self.fingerprint = fact.definition_fingerprint
            self.status = "running"
        elif isinstance(fact, SUSPENDING_FACTS):
            self.status = "waiting"
            self.suspension = fact
            self.suspension_version = recorded.version
            self.moved_from = ()
            self.matched_event_id = None
            self.callback_error = None
            self.task_outcomes = {}
            self.children_settled = None
            self.stopped = None
            self.fingerprint = fact.definition_fingerprint or self.fingerprint
            if isinstance(fact, FlowHeld) and fact.event_id is not None:
                if fact.reason == "batch":
                    if fact.event_id not in self.batch_event_ids:
                        self.batch_event_ids = (*self.batch_event_ids, fact.event_id)
                else:
                    self.trigger_override = fact.event_id
        elif isinstance(fact, StepEventMatched):
            if self.matched_event_id is None:
                self.matched_event_id = fact.event_id
        elif isinstance(fact, (CallbackCompleted, CallbackFailed)):
            if self._settles_open_callback(fact):
                self.matched_event_id = fact.event_id
                if isinstance(fact, CallbackFailed):
                    self.callback_error = fact.error
        elif isinstance(fact, CallbackHeartbeat):
            open_ = self.suspension
            if self._settles_open_callback(fact) and isinstance(open_, StepWaitingForCallback):
                self.suspension = replace(open_, heartbeat_at=fact.deadline)
        elif isinstance(fact, (TaskCompleted, TaskFailed)):
            if self.waits_for_task(fact.task_id):
                self.task_outcomes[fact.task_id] = fact
                self.outcome_recorded_at = recorded.recorded_at
        elif isinstance(fact, ChildrenSettled):
            open_ = self.suspension
            if (
                isinstance(open_, ChildrenWaiting)
                and open_.join_id == fact.join_id
                and self.children_settled is None
            ):
                self.children_settled = fact
                self.outcome_recorded_at = recorded.recorded_at
        elif isinstance(fact, StepStopped):
            if self.suspension is not None and fact.suspension_version == self.suspension_version:
                self.stopped = fact
        elif isinstance(fact, StepResumed):
            self.status = "running"
            self.suspension = None
            self.matched_event_id = None
            self.callback_error = None
            self.task_outcomes = {}
            self.children_settled = None
            self.stopped = None
        elif isinstance(fact, RunCompleted):
            self.status = "completed"
            self.suspension = None
        elif isinstance(fact, RunFailed):
            self.status = "failed"
            self.suspension = None
            self.last_failure = fact
        elif isinstance(fact, RunCancelled):
            self.status = "cancelled"
            self.suspension = None
            self.cancel_reason = fact.reason
        elif isinstance(fact, RunRedriven):
            self.status = "running"
            self.fingerprint = fact.definition_fingerprint or self.fingerprint
        elif isinstance(fact, RunMigrated):
            open_ = self.suspension
            if open_ is not None and fact.suspension_version == self.suspension_version:
                self.suspension = fact.moved(open_)
                self.moved_from += (open_.step_index,)
                self.fingerprint = fact.to_fingerprint

    def waits_at(self, step_index: int) -> bool:
        """Whether the open suspension is at `step_index`, or was before a migration
        moved it (the same suspension: a request for its old step is for it)."""
        open_ = self.suspension
        return open_ is not None and (
            open_.step_index == step_index or step_index in self.moved_from
        )


def fold_run(run_id: str, tenant_id: str, facts: Sequence[RecordedFact]) -> RunState:
    """Fold a run stream's facts (oldest first) into a RunState."""
    state = RunState(run_id=run_id, tenant_id=tenant_id)
    for recorded in facts:
        state.apply(recorded)
    return state
