"""The interpreter: one pass over a run's step tree, dispatching each step to its family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..definition.dsl import (
    AwaitCallback,
    Branch,
    BranchResult,
    CallWorkflow,
    Compute,
    CreateCallback,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Retry,
    Return,
    Step,
    Task,
    Wait,
    WaitForCallback,
    WaitForCondition,
    WaitForEvent,
    WebhookSend,
)
from ..pass_result import CallbackNotReached, PassResult
from ..stream import Path
from .base import Returned, StepFailed, Suspend
from .callbacks import CallbackSteps
from .conditions import ConditionSteps
from .containers import ContainerSteps
from .waits import WaitSteps
from .work import WorkSteps


class Interpreter(ContainerSteps, WaitSteps, CallbackSteps, ConditionSteps, WorkSteps):
    """Executes one pass of a run (the arguments: see PassState)."""

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
        except Suspend as suspend:
            if self.callback.handed_out:
                return self._failed(CallbackNotReached(), suspend.suspension.path)
            return self._result("suspended", suspension=suspend.suspension)
        except Returned as returned:
            value = returned.value
            if isinstance(value, Mapping) and value.get("isSuccess") is False:
                return self._result(
                    "failed",
                    return_value=value,
                    reason="returned_failure",
                    error="workflow returned a failure",
                )
            return self._result("completed", return_value=value)
        except StepFailed as failed:
            return self._failed(failed.error, failed.path)
        branch = self.definition.branch_of
        if branch is not None and branch.result_key is not None:
            # A parallel's branch ends with the value its last storing step stored.
            return self._result("completed", return_value=self.results.get(branch.result_key))
        return self._result("completed")

    def _run_step(
        self, step: Step, prefix: Path, index: int, resume: Path | None, scope: dict[str, Any]
    ) -> None:
        path = [*prefix, {"i": index}]
        head = resume[0] if resume else None
        rest = resume[1:] if resume else None
        if isinstance(step, Retry):
            self._run_retry(step, prefix, index, head, rest, scope)
        elif isinstance(step, Branch):
            self._run_branch(step, prefix, index, head, rest, scope)
        elif isinstance(step, ForEach):
            self._run_for_each(step, prefix, index, head, rest, scope)
        elif resume is not None and isinstance(step, (WaitForCallback, AwaitCallback)):
            self._callback_resumed(step, path)  # its answer is seeded, as an event's is
        elif resume is not None and isinstance(step, (Wait, WaitForEvent)):
            # Resumed at this very step: its effect (the suspension) already happened;
            # the caller has seeded an awaited event's payload under its result key.
            return
        elif isinstance(step, WaitForCondition):
            self._wait_for_condition(step, path, scope, resumed=resume is not None)
        elif resume is not None and self._task_settled(step, path):
            return
        elif isinstance(step, Compute):
            value = self._checked(self._call(step.fn, path, scope), f"compute({step.key!r})", path)
            self._store(step.key, value)
        elif isinstance(step, Wait):
            self._wait(step, path, scope)
        elif isinstance(step, WaitForEvent):
            self._wait_for_event(step, path, scope)
        elif isinstance(step, WaitForCallback):
            self._wait_for_callback(step, path, scope)
        elif isinstance(step, CreateCallback):
            self._create_callback(step, path, scope)
        elif isinstance(step, AwaitCallback):
            self._await_callback(step, path, scope)
        elif isinstance(step, Task):
            self._run_task(step, path, scope)
        elif isinstance(step, (MailSend, WebhookSend)):
            self._deliver(step, path, scope)
        elif isinstance(step, Parallel):
            self._run_parallel(step, path, scope)
        elif isinstance(step, (CallWorkflow, Map)):
            self._children(step, path, scope)
        elif isinstance(step, (Return, BranchResult)):
            value = self._checked(self._call(step.value, path, scope), "return value", path)
            raise Returned(value)
