"""The ways a run suspends: a timer, an awaited event, a scheduled retry, a task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeAlias

from ..definition.completion import Completion
from ..durations import format_instant
from ..fast_init import fast_init
from .names import (
    CHILDREN_WAITING,
    NEVER,
    RETRY_SCHEDULED,
    STEP_WAITING,
    STEP_WAITING_FOR_EVENT,
    TASK_SCHEDULED,
    TASKS_SCHEDULED,
    Path,
    instant,
    optional,
    put_results,
    take_results,
)


@fast_init
@dataclass(frozen=True, kw_only=True)
class SuspensionFact:
    """What every suspension records: where the run stopped and the results its pass wrote.

    Results: a 0.1 suspension carries every result so far (`results`; `awaited_refs`
    maps the keys that hold an awaited event's payload to its inbox id, None when the
    wait timed out, so erasing that event erases it here too). Since 0.2 a suspension
    carries only what its pass wrote (`results_delta`, `awaited_refs_delta`): each
    result is recorded once, and a resume reads the current ones from the run_results
    projection (see names.put_results).
    """

    workflow_name: str
    trigger_event_type: str
    step_index: int
    path: Path
    definition_fingerprint: str
    results: dict[str, Any] | None = None
    awaited_refs: dict[str, str | None] | None = None
    results_delta: dict[str, Any] | None = None
    awaited_refs_delta: dict[str, str | None] | None = None
    redacted: bool = False  # an erasure blanked its payload-derived fields

    @property
    def due_at(self) -> datetime:
        """When the suspension is due without any event (wake time or timeout)."""
        raise NotImplementedError

    @property
    def entry_path(self) -> Path:
        """Where a resume re-enters the step tree."""
        return list(self.path) if self.path else [{"i": self.step_index}]

    @property
    def full_results(self) -> bool:
        """True for a 0.1 suspension, which carries every result so far."""
        return self.results is not None and self.results_delta is None

    def _common(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "workflowName": self.workflow_name,
            "triggerEventType": self.trigger_event_type,
            "stepIndex": self.step_index,
            "path": self.path,
            "definitionFingerprint": self.definition_fingerprint,
        }
        put_results(
            payload,
            self.results,
            self.awaited_refs,
            self.results_delta,
            self.awaited_refs_delta,
        )
        if self.redacted:
            payload["redacted"] = True
        return payload

    @staticmethod
    def _common_fields(p: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "workflow_name": p["workflowName"],
            "trigger_event_type": p.get("triggerEventType", ""),
            "step_index": int(p["stepIndex"]),
            "path": list(p.get("path") or []),
            "definition_fingerprint": p.get("definitionFingerprint", ""),
            **take_results(p),
            "redacted": bool(p.get("redacted", False)),
        }


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepWaiting(SuspensionFact):
    """Suspended at a `wait` until `wake_at`."""

    TYPE: ClassVar[str] = STEP_WAITING

    wake_at: datetime

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        return {**self._common(), "wakeAt": format_instant(self.wake_at)}

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaiting:
        return cls(**cls._common_fields(p), wake_at=instant(p["wakeAt"]))


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepWaitingForEvent(SuspensionFact):
    """Suspended at a `wait_for_event` until a matching event or `timeout_at`.

    Events stored at or after `lookback_from` may match; `consumed_event_ids` were
    taken by earlier waits of the run and never match again.
    """

    TYPE: ClassVar[str] = STEP_WAITING_FOR_EVENT

    event_type: str
    match: dict[str, Any] | None
    timeout_at: datetime
    lookback_from: datetime | None
    result_key: str
    consumed_event_ids: list[str] | None = None  # 0.1 only; since 0.2 in run_consumed_events

    @property
    def due_at(self) -> datetime:
        return self.timeout_at

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "eventType": self.event_type,
            "match": self.match,
            "timeoutAt": format_instant(self.timeout_at),
            "lookbackFrom": (
                None if self.lookback_from is None else format_instant(self.lookback_from)
            ),
            "resultKey": self.result_key,
            **(
                {}
                if self.consumed_event_ids is None
                else {"consumedEventIds": self.consumed_event_ids}
            ),
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaitingForEvent:
        lookback = p.get("lookbackFrom")
        return cls(
            **cls._common_fields(p),
            event_type=p["eventType"],
            match=p.get("match"),
            timeout_at=instant(p["timeoutAt"]),
            lookback_from=instant(lookback) if lookback else None,
            result_key=p.get("resultKey") or p["eventType"],
            consumed_event_ids=(
                None if p.get("consumedEventIds") is None else list(p["consumedEventIds"])
            ),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RetryScheduled(SuspensionFact):
    """A retry's attempt failed; the next attempt (`path` names it) runs at `wake_at`."""

    TYPE: ClassVar[str] = RETRY_SCHEDULED

    wake_at: datetime
    attempt: int
    max_attempts: int
    error: str

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "wakeAt": format_instant(self.wake_at),
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "error": self.error,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RetryScheduled:
        return cls(
            **cls._common_fields(p),
            wake_at=instant(p["wakeAt"]),
            attempt=int(p["attempt"]),
            max_attempts=int(p["maxAttempts"]),
            error=str(p.get("error", "")),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class TaskScheduled(SuspensionFact):
    """Suspended at a task: a worker runs it outside the pass (attempts, retries) and
    records its outcome on this stream; the run is due once the outcome is recorded.

    `task_key` is the result key, `task_id` the attempt group's idempotency key (what
    the task hands to the service it calls), `step_kind` task | mail.send | webhook.send.
    """

    TYPE: ClassVar[str] = TASK_SCHEDULED

    task_key: str
    task_id: str
    step_kind: str
    max_attempts: int
    timeout_ms: int | None = None
    catch: bool = False

    @property
    def due_at(self) -> datetime:
        return NEVER

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self._common(),
            "taskKey": self.task_key,
            "taskId": self.task_id,
            "stepKind": self.step_kind,
            "maxAttempts": self.max_attempts,
            "catch": self.catch,
        }
        optional(payload, "timeoutMs", self.timeout_ms)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TaskScheduled:
        return cls(
            **cls._common_fields(p),
            task_key=p["taskKey"],
            task_id=p["taskId"],
            step_kind=p.get("stepKind", "task"),
            max_attempts=int(p.get("maxAttempts") or 1),
            timeout_ms=p.get("timeoutMs"),
            catch=bool(p.get("catch", False)),
        )


@fast_init
@dataclass(frozen=True)
class ParallelTask:
    """One task of a parallel suspension (what TaskScheduled says of a single task)."""

    task_key: str
    task_id: str
    step_kind: str
    max_attempts: int
    timeout_ms: int | None = None
    catch: bool = False

    def to_json(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "taskKey": self.task_key,
            "taskId": self.task_id,
            "stepKind": self.step_kind,
            "maxAttempts": self.max_attempts,
            "catch": self.catch,
        }
        optional(item, "timeoutMs", self.timeout_ms)
        return item

    @classmethod
    def from_json(cls, p: Mapping[str, Any]) -> ParallelTask:
        return cls(
            task_key=p["taskKey"],
            task_id=p["taskId"],
            step_kind=p.get("stepKind", "task"),
            max_attempts=int(p.get("maxAttempts") or 1),
            timeout_ms=p.get("timeoutMs"),
            catch=bool(p.get("catch", False)),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class TasksScheduled(SuspensionFact):
    """Suspended at `parallel`: its tasks run at once, each recording its outcome here
    (TaskCompleted/TaskFailed by task id); the run is due once every task has one, or
    at the first failure the workflow does not catch. `result_key` (optional) gets the
    list of results: of every task of the step, in order, as `result_keys` names them
    when a redrive ran only some of them again (the others' results are seeded).

    With a `completion` policy the run is due once the policy decides, and
    `result_key` gets the batch result; `catch`: an exceeded tolerance lets the run go
    on (definition/completion.py)."""

    TYPE: ClassVar[str] = TASKS_SCHEDULED

    tasks: tuple[ParallelTask, ...]
    result_key: str | None = None
    result_keys: tuple[str, ...] | None = None
    completion: Completion | None = None
    catch: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """Every task key of the step, in order (what `result_key`'s list holds)."""
        if self.result_keys is not None:
            return self.result_keys
        return tuple(t.task_key for t in self.tasks)

    @property
    def due_at(self) -> datetime:
        return NEVER

    def task(self, task_id: str) -> ParallelTask | None:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    def to_payload(self) -> dict[str, Any]:
        payload = {**self._common(), "tasks": [t.to_json() for t in self.tasks]}
        optional(payload, "resultKey", self.result_key)
        if self.result_keys is not None:
            payload["resultKeys"] = list(self.result_keys)
        if self.completion is not None:
            payload["completion"] = self.completion.to_json()
        if self.catch:
            payload["catch"] = True
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> TasksScheduled:
        keys = p.get("resultKeys")
        return cls(
            **cls._common_fields(p),
            tasks=tuple(ParallelTask.from_json(t) for t in p.get("tasks") or []),
            result_key=p.get("resultKey"),
            result_keys=tuple(keys) if keys is not None else None,
            completion=_completion(p),
            catch=bool(p.get("catch", False)),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class ChildrenWaiting(SuspensionFact):
    """Suspended at call_workflow (`join_kind` call) or map: the worker starts the
    children (at most `concurrency` at once); the run is due once all have settled, or
    at the first failure the workflow does not catch (a ChildrenSettled fact says so).
    `child_run_id` names the child of a call. A map with a `completion` policy is due
    once the policy decides, and its `result_key` gets the batch result."""

    TYPE: ClassVar[str] = CHILDREN_WAITING

    join_id: str
    join_kind: str  # call | map
    child_workflow: str
    children: int
    concurrency: int
    result_key: str | None = None
    catch: bool = False
    child_run_id: str | None = None
    completion: Completion | None = None

    @property
    def due_at(self) -> datetime:
        return NEVER

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self._common(),
            "joinId": self.join_id,
            "joinKind": self.join_kind,
            "childWorkflow": self.child_workflow,
            "children": self.children,
            "concurrency": self.concurrency,
            "catch": self.catch,
        }
        optional(payload, "resultKey", self.result_key)
        optional(payload, "childRunId", self.child_run_id)
        if self.completion is not None:
            payload["completion"] = self.completion.to_json()
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ChildrenWaiting:
        return cls(
            **cls._common_fields(p),
            join_id=p["joinId"],
            join_kind=p.get("joinKind", "map"),
            child_workflow=p["childWorkflow"],
            children=int(p["children"]),
            concurrency=int(p.get("concurrency") or 1),
            result_key=p.get("resultKey"),
            catch=bool(p.get("catch", False)),
            child_run_id=p.get("childRunId"),
            completion=_completion(p),
        )


def _completion(p: Mapping[str, Any]) -> Completion | None:
    """A stored completion policy (absent before release 0.4, and when none was set)."""
    stored = p.get("completion")
    return Completion.from_json(stored) if isinstance(stored, Mapping) else None


Suspension: TypeAlias = (
    StepWaiting
    | StepWaitingForEvent
    | RetryScheduled
    | TaskScheduled
    | TasksScheduled
    | ChildrenWaiting
)
