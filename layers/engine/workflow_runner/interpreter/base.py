"""The state of one pass, shared by the step families: its results, the context steps
see, and how arguments are resolved and checked. Steps stop a pass by raising one of the
three signals below; `Interpreter.run` turns them into its PassResult."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from ..callback_tokens import PassCallback, callback_base_url
from ..definition.branches import branch_context
from ..definition.dsl import (
    DomainEvent,
    Step,
    StepContext,
    WorkflowDefinition,
    WorkflowInfo,
    resolve,
)
from ..durations import resolve_wake_at
from ..pass_result import (
    ChildJoin,
    DispatchRequest,
    InvalidArgument,
    PassResult,
    Reentry,
    ResumedCondition,
    ResumedTask,
    Suspension,
    describe_step_error,
)
from ..storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
from ..stream import Path
from .callback_view import CallbackNames, LoadCallbacks, PassCallbacks

# Backoff jitter needs no generator of its own per pass: seeding a new Random reads
# os.urandom, about a tenth of a short resume's Python. Tests pass their own.
_JITTER = random.Random()


class Suspend(Exception):
    """The pass stops at a suspension."""

    def __init__(self, suspension: Suspension) -> None:
        self.suspension = suspension


class Returned(Exception):
    """A return step ended the run with a value."""

    def __init__(self, value: Any) -> None:
        self.value = value


class StepFailed(Exception):
    """A step failed at `path` (a retry around it may catch it)."""

    def __init__(self, error: BaseException, path: Path) -> None:
        self.error = error
        self.path = path


class PassState:
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
        resumed_condition: the wait_for_condition a resume re-enters at and its last
            checkpoint (its next check's number and state).
        max_result_bytes: the largest result a step may store.
        callback_secret: the run's key for callback tokens (None: random tokens).
        parent_run_id: the run that started this one (`ctx.workflow.parent_run_id`).
        map_index: the index of the item a map started this run for
            (`ctx.workflow.map_index`).
        known_callbacks: reads the callbacks earlier passes created (None: none).
        callback_error: the error the callback the resume re-enters at answered with.
        batch_events: a batch's trigger events (`ctx.events`; Batch).
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
        resumed_condition: ResumedCondition | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        callback_secret: str | None = None,
        parent_run_id: str | None = None,
        map_index: int | None = None,
        known_callbacks: LoadCallbacks | None = None,
        callback_error: str | None = None,
        batch_events: Sequence[DomainEvent] = (),
    ) -> None:
        self.definition = definition
        self.event = event
        self.run_id = run_id
        self.now = now
        self.results: dict[str, Any] = dict(results or {})
        if definition.branch_of is not None:
            # A parallel's branch sees its parent's event and results (its own over them).
            self.event, self.results = branch_context(event, self.results)
        self.awaited_refs: dict[str, str | None] = dict(awaited_refs or {})
        self.written: dict[str, None] = dict.fromkeys(written)
        self.dispatch_seed = dispatch_seed
        self.task_seed = dispatch_seed if task_seed is None else task_seed
        self.run_started_at = run_started_at or now
        self.rng = rng or _JITTER
        self.resumed_task = resumed_task
        self.reentry = reentry
        self.resumed_condition = resumed_condition
        self.max_result_bytes = max_result_bytes
        self.parent_run_id = parent_run_id
        self.map_index = map_index
        self.batch_events = tuple(batch_events)
        self.dispatches: list[DispatchRequest] = []
        self.starts: list[ChildJoin] = []
        self._attempts: list[int] = []
        base_url = callback_base_url()
        self.callback = PassCallback(
            callback_secret, dispatch_seed, base_url, lambda: len(self._attempts)
        )
        self.callbacks = PassCallbacks(callback_secret, dispatch_seed, base_url, known_callbacks)
        self.callback_names = CallbackNames(self.callbacks)
        self.callback_error = callback_error

    # --- walking the tree (the dispatch over step kinds is Interpreter's) -------------

    def _run_list(
        self, steps: Sequence[Step], prefix: Path, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        start = int(resume[0]["i"]) if resume else 0
        for index in range(start, len(steps)):
            self._run_step(steps[index], prefix, index, resume if index == start else None, scope)

    def _run_step(
        self, step: Step, prefix: Path, index: int, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        raise NotImplementedError  # Interpreter

    # --- results ------------------------------------------------------------------------

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
            created_callbacks=self.callbacks.made,
            closed_callbacks=self.callbacks.closed,
            **kw,
        )

    def _store(self, key: str, value: Any) -> None:
        self.results[key] = value
        self.awaited_refs.pop(key, None)
        self.written[key] = None

    # --- what steps see ---------------------------------------------------------------

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
                map_index=self.map_index,
            ),
            now=self.now,
            callback=self.callback,
            callbacks=self.callback_names,
            batch_events=self.batch_events,
        )

    def _reentered(self, path: Path) -> Reentry | None:
        """What a redrive keeps of the step at `path` (None: nothing, run it as new)."""
        reentry = self.reentry
        return reentry if reentry is not None and reentry.path == path else None

    def _checked(self, value: Any, what: str, path: Path) -> Any:
        try:
            check_storable(value, what, self.max_result_bytes)
        except NotStorable as error:
            raise StepFailed(error, path) from error
        return value

    def _call(self, value: Any, path: Path, scope: dict[str, Any]) -> Any:
        try:
            return resolve(value, self._ctx(path, scope))
        except (Suspend, Returned, StepFailed):
            raise
        except Exception as error:
            raise StepFailed(error, path) from error

    def _wake_at(self, raw: Any, path: Path, argument: str) -> datetime:
        try:
            return resolve_wake_at(raw, self.now)
        except Exception as error:
            raise StepFailed(InvalidArgument.of(argument, error), path) from error
