"""Runs a workflow's step tree for one pass: from a start or resume point to the next
suspension, a return, the end, or a failure. Pure: no I/O; the caller persists."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from .callback_tokens import PassCallback, callback_base_url, token_hash
from .definition.dsl import (
    Branch,
    CallWorkflow,
    Compute,
    DomainEvent,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Retry,
    Return,
    Step,
    StepContext,
    Task,
    Wait,
    WaitForCallback,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
    WorkflowInfo,
    resolve,
)
from .definition.retry import RetryPolicy
from .durations import parse_duration, resolve_wake_at
from .pass_result import (
    CallbackNotReached,
    CallbackWait,
    ChildJoin,
    DispatchRequest,
    InvalidArgument,
    PassResult,
    Reentry,
    ResumedTask,
    RetryWait,
    Suspension,
    TaskWait,
    describe_step_error,
)
from .step_requests import (
    DISPATCH_NAMESPACE,
    backoff_delay,
    child_join,
    delivery_request,
    event_wait,
    task_id_for,
    task_key,
)
from .storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
from .stream import NEVER, Frame, Path

# The retry policy of a delivery that names none (as the dispatcher always did).
DELIVERY_ATTEMPTS = 5

# Backoff jitter needs no generator of its own per pass: seeding a new Random reads
# os.urandom, about a tenth of a short resume's Python. Tests pass their own.
_JITTER = random.Random()


class _Suspend(Exception):
    def __init__(self, suspension: Suspension) -> None:
        self.suspension = suspension


class _Returned(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _StepFailed(Exception):
    def __init__(self, error: BaseException, path: Path) -> None:
        self.error = error
        self.path = path


class Interpreter:
    """Executes one pass of a run.

    Args:
        definition: the workflow (the exact version the run is pinned to).
        event: the run's trigger event.
        run_id: the run.
        now: business time of the pass.
        results: step results restored for a resume (copied).
        awaited_refs: result keys that hold an awaited event's payload -> inbox event id.
        dispatch_seed: unique per pass and stable across retries of the same pass, so
            a pass that is rolled back and repeated requests the same dispatch ids (a
            redrive repeats the failed pass's seed: what it dispatched keeps its id).
        task_seed: the same for tasks (default: dispatch_seed); unique per pass even for
            a redrive, which must run a failed task again under a new id.
        written: keys to record as written by this pass although it did not compute
            them (the awaited payload or task result a resume seeds).
        resumed_task: the task a resume re-enters at and how it ended.
        reentry: what a redrive keeps of the work step it runs again.
        max_result_bytes: the largest result a step may store.
        callback_secret: the run's key for callback tokens (None: random tokens).
        parent_run_id: the run that started this one (`ctx.workflow.parent_run_id`).
    """

    def __init__(
        self,
        definition: WorkflowDefinition,
        event: DomainEvent,
        run_id: str,
        now: datetime,
        results: dict[str, Any] | None = None,
        awaited_refs: dict[str, str | None] | None = None,
        dispatch_seed: str = "",
        run_started_at: datetime | None = None,
        task_seed: str | None = None,
        rng: random.Random | None = None,
        written: Sequence[str] = (),
        resumed_task: ResumedTask | None = None,
        reentry: Reentry | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        callback_secret: str | None = None,
        parent_run_id: str | None = None,
    ) -> None:
        self.definition = definition
        self.event = event
        self.run_id = run_id
        self.now = now
        self.results: dict[str, Any] = dict(results or {})
        self.awaited_refs: dict[str, str | None] = dict(awaited_refs or {})
        self.written: dict[str, None] = dict.fromkeys(written)
        self.dispatch_seed = dispatch_seed
        self.task_seed = dispatch_seed if task_seed is None else task_seed
        self.run_started_at = run_started_at or now
        self.rng = rng or _JITTER
        self.resumed_task = resumed_task
        self.reentry = reentry
        self.max_result_bytes = max_result_bytes
        self.parent_run_id = parent_run_id
        self.dispatches: list[DispatchRequest] = []
        self.starts: list[ChildJoin] = []
        self._attempts: list[int] = []
        self.callback = PassCallback(
            callback_secret, dispatch_seed, callback_base_url(), lambda: len(self._attempts)
        )

    def run(self, resume_path: Path | None = None) -> PassResult:
        """Run from the start (no path) or resume at `resume_path`.

        A resume path ending at a wait or wait_for_event continues after that step
        (seed the awaited result first); one ending at a retry frame re-enters the
        retry at the attempt the frame names; one ending at a task continues after it
        with its seeded result, fails with it (`resumed_task.failure`) or, when no
        outcome is given (a redrive), runs the task again.
        """
        try:
            self._run_list(self.definition.steps, [], resume_path or None, {})
        except _Suspend as suspend:
            if self.callback.handed_out:
                return self._failed(CallbackNotReached(), suspend.suspension.path)
            return self._result("suspended", suspension=suspend.suspension)
        except _Returned as returned:
            value = returned.value
            if isinstance(value, Mapping) and value.get("isSuccess") is False:
                return self._result(
                    "failed",
                    return_value=value,
                    reason="returned_failure",
                    error="workflow returned a failure",
                )
            return self._result("completed", return_value=value)
        except _StepFailed as failed:
            return self._failed(failed.error, failed.path)
        return self._result("completed")

    def _failed(self, error: BaseException, path: Path) -> PassResult:
        return self._result(
            "failed",
            error=describe_step_error(error),
            error_detail=f"{type(error).__name__}: {error}",
            failed_path=path,
            reason=getattr(error, "reason", None),
        )

    def _result(
        self, outcome: Literal["suspended", "completed", "failed"], **kw: Any
    ) -> PassResult:
        return PassResult(
            outcome=outcome,
            results=self.results,
            awaited_refs=self.awaited_refs,
            written=list(self.written),
            dispatches=self.dispatches,
            starts=self.starts,
            **kw,
        )

    def _store(self, key: str, value: Any) -> None:
        self.results[key] = value
        self.awaited_refs.pop(key, None)
        self.written[key] = None

    def _ctx(self, path: Path, scope: dict[str, Any]) -> StepContext:
        return StepContext(
            event=self.event,
            steps=self.results,
            scope=scope,
            workflow=WorkflowInfo(
                run_id=self.run_id,
                workflow_name=self.definition.name,
                step_index=int(path[0]["i"]),
                retry_attempt=self._attempts[-1] if self._attempts else 1,
                definition_fingerprint=self.definition.fingerprint,
                parent_run_id=self.parent_run_id,
            ),
            now=self.now,
            callback=self.callback,
        )

    def _run_list(
        self, steps: Sequence[Step], prefix: Path, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        start = int(resume[0]["i"]) if resume else 0
        for index in range(start, len(steps)):
            self._run_step(steps[index], prefix, index, resume if index == start else None, scope)

    def _run_step(
        self, step: Step, prefix: Path, index: int, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        path = [*prefix, {"i": index}]
        head = resume[0] if resume else None
        rest = resume[1:] if resume else None
        if isinstance(step, Retry):
            self._run_retry(step, prefix, index, head, rest, scope)
            return
        if isinstance(step, Branch):
            if head is not None and head.get("arm") in ("true", "false"):
                arm = str(head["arm"])
            else:
                arm = "true" if self._call(step.if_, path, scope) else "false"
            steps = step.on_true if arm == "true" else step.on_false
            self._run_list(steps, [*prefix, {"i": index, "arm": arm}], rest or None, scope)
            return
        if isinstance(step, ForEach):
            self._run_for_each(step, prefix, index, head, rest, scope)
            return
        if resume is not None and isinstance(step, (Wait, WaitForEvent, WaitForCallback)):
            # Resumed at this very step: its effect (the suspension) already happened;
            # the caller has seeded an awaited event's payload under its result key.
            return
        if resume is not None and self._task_settled(step, path):
            return
        if isinstance(step, Compute):
            value = self._checked(self._call(step.fn, path, scope), f"compute({step.key!r})", path)
            self._store(step.key, value)
        elif isinstance(step, Wait):
            raw = step.for_ if step.for_ is not None else step.until
            argument = "for_" if step.for_ is not None else "until"
            wake_at = self._wake_at(self._call(raw, path, scope), path, argument)
            raise _Suspend(Suspension("waiting", path, wake_at))
        elif isinstance(step, WaitForEvent):
            self._suspend_for_event(step, path, scope)
        elif isinstance(step, WaitForCallback):
            timeout_at = self._wake_at(self._call(step.timeout, path, scope), path, "timeout")
            callback = CallbackWait(step.result_key, token_hash(self.callback.take()))
            raise _Suspend(Suspension("waiting-for-callback", path, timeout_at, callback=callback))
        elif isinstance(step, Task):
            raise _Suspend(
                Suspension("task-scheduled", path, NEVER, task=self._task(step, path, scope))
            )
        elif isinstance(step, (MailSend, WebhookSend)):
            request = self._delivery_request(step, path, scope)
            if step.result_key is not None:
                wait = self._task(step, path, scope, request)
                raise _Suspend(Suspension("task-scheduled", path, NEVER, task=wait))
            self._request_dispatch(step, path, request)
        elif isinstance(step, Parallel):
            reentered = self._reentered(path)
            kept = reentered.kept_tasks if reentered else frozenset()
            tasks = tuple(
                self._task(sub, [*path, {"i": j}], scope, self._request_of(sub, path, scope))
                for j, sub in enumerate(step.steps)
                if isinstance(sub, (Task, MailSend, WebhookSend)) and task_key(sub) not in kept
            )
            keys = tuple(
                task_key(sub)
                for sub in step.steps
                if isinstance(sub, (Task, MailSend, WebhookSend))
            )
            raise _Suspend(
                Suspension(
                    "tasks-scheduled",
                    path,
                    NEVER,
                    tasks=tasks,
                    result_key=step.result_key,
                    result_keys=keys if kept else None,
                )
            )
        elif isinstance(step, (CallWorkflow, Map)):
            self._children(step, path, scope)
        elif isinstance(step, Return):
            value = self._checked(self._call(step.value, path, scope), "return value", path)
            raise _Returned(value)

    def _task_settled(self, step: Step, path: Path) -> bool:
        """Resumed at a task whose outcome is recorded: go on after it (its result is
        seeded), or fail with its failure. False: run the task (again)."""
        resumed = self.resumed_task
        if resumed is None or resumed.path != path:
            return False
        if resumed.failure is not None:
            raise _StepFailed(resumed.failure, path)
        return isinstance(step, (Task, MailSend, WebhookSend, Parallel, CallWorkflow, Map))

    def _reentered(self, path: Path) -> Reentry | None:
        """What a redrive keeps of the step at `path` (None: nothing, run it as new)."""
        reentry = self.reentry
        return reentry if reentry is not None and reentry.path == path else None

    def _checked(self, value: Any, what: str, path: Path) -> Any:
        try:
            check_storable(value, what, self.max_result_bytes)
        except NotStorable as error:
            raise _StepFailed(error, path) from error
        return value

    def _call(self, value: Any, path: Path, scope: dict[str, Any]) -> Any:
        try:
            return resolve(value, self._ctx(path, scope))
        except (_Suspend, _Returned, _StepFailed):
            raise
        except Exception as error:
            raise _StepFailed(error, path) from error

    def _wake_at(self, raw: Any, path: Path, argument: str) -> datetime:
        try:
            return resolve_wake_at(raw, self.now)
        except Exception as error:
            raise _StepFailed(InvalidArgument.of(argument, error), path) from error

    def _suspend_for_event(self, step: WaitForEvent, path: Path, scope: dict[str, Any]) -> None:
        match = self._call(step.match, path, scope)
        timeout_at = self._wake_at(self._call(step.timeout, path, scope), path, "timeout")
        lookback = self._call(step.lookback, path, scope)
        try:
            wait = event_wait(
                step,
                match,
                lookback,
                self.now,
                self.event.time or self.run_started_at,
                self.max_result_bytes,
            )
        except InvalidArgument as error:
            raise _StepFailed(error, path) from error
        raise _Suspend(Suspension("waiting-for-event", path, timeout_at, event=wait))

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
        except _StepFailed:
            raise
        except Exception as error:
            raise _StepFailed(error, path) from error
        if join.kind == "start":
            self.starts.append(join)
        elif not join.children:  # a map over nothing
            if join.result_key:
                self._store(join.result_key, [])
        else:
            raise _Suspend(Suspension("children-waiting", path, NEVER, join=join))

    def _run_retry(
        self,
        step: Retry,
        prefix: Path,
        index: int,
        head: Frame | None,
        rest: Path | None,
        scope: dict[str, Any],
    ) -> None:
        attempt = int(head.get("attempt", 1)) if head is not None else 1
        frame_path = [*prefix, {"i": index, "attempt": attempt}]
        self._attempts.append(attempt)
        try:
            self._run_list(step.do, frame_path, rest or None, scope)
        except _StepFailed as failed:
            if attempt >= step.times:
                raise
            self.callback.forget_from(len(self._attempts))  # the attempt's steps run again
            wake_at = self.now + backoff_delay(step, attempt, self.rng)
            wait = RetryWait(attempt, step.times, describe_step_error(failed.error))
            retry_path = [*prefix, {"i": index, "attempt": attempt + 1}]
            raise _Suspend(Suspension("retry-scheduled", retry_path, wake_at, retry=wait)) from None
        finally:
            self._attempts.pop()

    def _run_for_each(
        self,
        step: ForEach,
        prefix: Path,
        index: int,
        head: Frame | None,
        rest: Path | None,
        scope: dict[str, Any],
    ) -> None:
        path = [*prefix, {"i": index}]
        items = self._call(step.over, path, scope)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise _StepFailed(
                InvalidArgument("over", f"for_each needs a list, got {type(items).__name__}"),
                path,
            )
        first = int(head.get("item", 0)) if head is not None else 0
        for k in range(first, len(items)):
            inner_scope = {**scope, step.as_: items[k]}
            inner_resume = rest if (head is not None and k == first) else None
            self._run_list(
                step.do, [*prefix, {"i": index, "item": k}], inner_resume or None, inner_scope
            )

    def _delivery_request(
        self, step: MailSend | WebhookSend, path: Path, scope: dict[str, Any]
    ) -> dict[str, Any]:
        """The request a mail or webhook step asks for, checked before it is stored."""
        try:
            return delivery_request(
                step, lambda value, at: self._call(value, path, at), scope, self.max_result_bytes
            )
        except _StepFailed:
            raise
        except Exception as error:
            raise _StepFailed(error, path) from error

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
