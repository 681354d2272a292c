"""Steps whose work happens outside the pass: tasks (and mail and webhooks with a result
key) run by the worker, parallel tasks, child runs; and fire-and-forget mail and
webhooks, requested here and delivered after commit."""

from __future__ import annotations

import uuid
from typing import Any

from ..definition.branches import branch_input, family_name, static_place
from ..definition.completion import (
    FAILURE_TOLERANCE_EXCEEDED,
    CompletionReason,
    ItemOutcome,
    batch_result,
    decide,
)
from ..definition.dsl import CallWorkflow, MailSend, Map, Parallel, Step, Task, WebhookSend
from ..definition.retry import RetryPolicy
from ..durations import parse_duration
from ..flow.keys import task_limits
from ..pass_result import (
    ChildJoin,
    DispatchRequest,
    Suspension,
    TaskWait,
    ToleranceExceededError,
)
from ..step_requests import (
    DISPATCH_NAMESPACE,
    branches_join,
    child_join,
    delivery_request,
    task_id_for,
    task_key,
)
from ..stream import NEVER, Path
from .base import PassState, StepFailed, Suspend

# The retry policy of a delivery that names none (as the dispatcher always did).
DELIVERY_ATTEMPTS = 5


class WorkSteps(PassState):
    def _task_settled(self, step: Step, path: Path) -> bool:
        """Resumed at a task whose outcome is recorded: go on after it (its result is
        seeded), or fail with its failure. False: run the task (again)."""
        resumed = self.resumed_task
        if resumed is None or resumed.path != path:
            return False
        if resumed.failure is not None:
            raise StepFailed(resumed.failure, path)
        return isinstance(step, (Task, MailSend, WebhookSend, Parallel, CallWorkflow, Map))

    def _run_task(self, step: Task, path: Path, scope: dict[str, Any]) -> None:
        raise Suspend(Suspension("task-scheduled", path, NEVER, task=self._task(step, path, scope)))

    def _deliver(self, step: MailSend | WebhookSend, path: Path, scope: dict[str, Any]) -> None:
        request = self._delivery_request(step, path, scope)
        if step.result_key is not None:
            wait = self._task(step, path, scope, request)
            raise Suspend(Suspension("task-scheduled", path, NEVER, task=wait))
        self._request_dispatch(step, path, request)

    def _run_parallel(self, step: Parallel, path: Path, scope: dict[str, Any]) -> None:
        if step.branches is not None:
            self._run_branches(step, path)
            return
        reentered = self._reentered(path)
        kept = reentered.kept_tasks if reentered else frozenset()
        tasks = tuple(
            self._task(sub, [*path, {"i": j}], scope, self._request_of(sub, path, scope))
            for j, sub in enumerate(step.steps)
            if isinstance(sub, (Task, MailSend, WebhookSend)) and task_key(sub) not in kept
        )
        keys = tuple(
            task_key(sub) for sub in step.steps if isinstance(sub, (Task, MailSend, WebhookSend))
        )
        raise Suspend(
            Suspension(
                "tasks-scheduled",
                path,
                NEVER,
                tasks=tasks,
                result_key=step.result_key,
                result_keys=keys if kept else None,
                completion=step.completion,
                catch=step.catch,
            )
        )

    def _task(
        self,
        step: Task | MailSend | WebhookSend,
        path: Path,
        scope: dict[str, Any],
        request: dict[str, Any] | None = None,
    ) -> TaskWait:
        """The task a step asks for; the worker runs it with `scope` as ctx.scope."""
        scope_copy = self._checked(dict(scope), f"the for_each items around {step.kind}", path)
        policy: RetryPolicy | None = step.retry
        timeout_ms: int | None = None
        if isinstance(step, Task):
            timeout_ms = int(parse_duration(step.timeout).total_seconds() * 1000)
        return TaskWait(
            task_key=task_key(step),
            task_id=task_id_for(self.run_id, self.task_seed, path),
            step_kind=step.kind,
            max_attempts=policy.max_attempts if policy else DELIVERY_ATTEMPTS,
            timeout_ms=timeout_ms,
            catch=step.catch,
            scope=scope_copy,
            request=request,
            limits=task_limits(
                self.definition,
                step,
                task_key(step),
                self._ctx(path, scope),
                lambda v: self._call(v, path, scope),
            ),
        )

    def _request_of(self, step: Step, path: Path, scope: dict[str, Any]) -> dict[str, Any] | None:
        if isinstance(step, (MailSend, WebhookSend)):
            return self._delivery_request(step, path, scope)
        return None

    def _children(self, step: CallWorkflow | Map, path: Path, scope: dict[str, Any]) -> None:
        """Ask for child runs: suspend until they settle, or go on (start_workflow)."""
        reentered = self._reentered(path)
        try:
            # The dispatch seed, which a redrive repeats: a child the failed pass started
            # is the same child again, as its mail is the same mail.
            join = child_join(
                step,
                self.run_id,
                self.dispatch_seed,
                path,
                lambda value, at: self._call(value, path, at),
                scope,
                self.max_result_bytes,
                join_id=reentered.join_id if reentered else None,
            )
        except StepFailed:
            raise
        except Exception as error:
            raise StepFailed(error, path) from error
        self._await_join(join, path)

    def _run_branches(self, step: Parallel, path: Path) -> None:
        """A parallel of branches: one child run per branch (definition/branches.py),
        waited for as a map's children are."""
        reentered = self._reentered(path)
        family = family_name(self.definition.name, static_place(path), self.definition.version)
        try:
            join = branches_join(
                step,
                family,
                self.run_id,
                self.dispatch_seed,
                path,
                branch_input(self.event, self.results),
                self.max_result_bytes,
                join_id=reentered.join_id if reentered else None,
            )
        except Exception as error:
            raise StepFailed(error, path) from error
        self._await_join(join, path)

    def _await_join(self, join: ChildJoin, path: Path) -> None:
        decided = decide(join.completion, len(join.children), 0, 0) if join.completion else None
        if join.kind == "start":
            self.starts.append(join)
        elif decided is not None:  # over nothing, or fewer items than min_successful
            self._decided_at_once(join, decided, path)
        elif not join.children:  # a map over nothing
            if join.result_key:
                self._store(join.result_key, [])
        else:
            raise Suspend(Suspension("children-waiting", path, NEVER, join=join))

    def _decided_at_once(self, join: ChildJoin, decided: CompletionReason, path: Path) -> None:
        """A map whose completion policy decides before any child starts: its batch, no
        child started (or the run fails: min_successful is more than it has items)."""
        if decided == FAILURE_TOLERANCE_EXCEEDED and not join.catch:
            raise StepFailed(ToleranceExceededError("map", 0), path)
        if join.result_key:
            stopped = [ItemOutcome("stopped")] * len(join.children)
            self._store(join.result_key, batch_result(stopped, decided))

    def _delivery_request(
        self, step: MailSend | WebhookSend, path: Path, scope: dict[str, Any]
    ) -> dict[str, Any]:
        """The request a mail or webhook step asks for, checked before it is stored."""
        try:
            return delivery_request(
                step, lambda value, at: self._call(value, path, at), scope, self.max_result_bytes
            )
        except StepFailed:
            raise
        except Exception as error:
            raise StepFailed(error, path) from error

    def _request_dispatch(
        self, step: MailSend | WebhookSend, path: Path, request: dict[str, Any]
    ) -> None:
        seq = len(self.dispatches)
        request_id = str(
            uuid.uuid5(DISPATCH_NAMESPACE, f"{self.run_id}|{self.dispatch_seed}|{seq}")
        )
        self.dispatches.append(
            DispatchRequest(
                request_id=request_id,
                step_kind=step.kind,
                step_index=int(path[0]["i"]),
                path=path,
                request=request,
            )
        )
        if step.key:
            self._store(step.key, {"requestId": request_id})
