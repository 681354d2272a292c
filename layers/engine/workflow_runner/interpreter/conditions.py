"""wait_for_condition: run the check, and either go on with Done's value under the
step's key or suspend at a checkpoint (StepWaitingForCondition) until the next check.

The check runs inside the pass, so the checkpoint it leads to commits with the pass or
not at all: a pass cut off after a check repeats that check only, from the checkpoint
before it. A resume at the step runs the next check with the recorded state."""

from __future__ import annotations

from typing import Any

from ..definition.conditions import Continue, Done, condition_delay
from ..definition.dsl import WaitForCondition
from ..durations import parse_duration
from ..pass_result import (
    ConditionCheckFailed,
    ConditionNotMet,
    ConditionWait,
    Suspension,
)
from ..stream import Path
from .base import PassState, Returned, StepFailed, Suspend


class ConditionSteps(PassState):
    def _wait_for_condition(
        self, step: WaitForCondition, path: Path, scope: dict[str, Any], resumed: bool
    ) -> None:
        checkpoint = self.resumed_condition
        if resumed and checkpoint is not None and checkpoint.path == path:
            attempt, state, first = (
                checkpoint.attempts + 1,
                checkpoint.state,
                checkpoint.first_check_at,
            )
        else:
            attempt, first = 1, self.now
            initial = self._call(step.initial, path, scope)
            state = self._checked(initial, f"the initial state of condition {step.key!r}", path)
        try:
            outcome = step.check(self._ctx(path, scope), state)
        except (Suspend, Returned, StepFailed):
            raise
        except Exception as error:
            self._condition_failed(
                step,
                path,
                ConditionCheckFailed(step.key, type(error).__name__, attempt, str(error)),
            )
            return
        if isinstance(outcome, Done):
            value = self._checked(outcome.value, f"the value of condition {step.key!r}", path)
            self._store(step.key, value)
            return
        if not isinstance(outcome, Continue):
            self._condition_failed(
                step,
                path,
                ConditionCheckFailed(
                    step.key,
                    "NotDoneOrContinue",
                    attempt,
                    f"check returned {type(outcome).__name__}, not Done(...) or Continue(...)",
                ),
            )
            return
        state = self._checked(outcome.state, f"the state of condition {step.key!r}", path)
        deadline = first + parse_duration(step.timeout) if step.timeout else None
        if step.max_attempts is not None and attempt >= step.max_attempts:
            why = f"{step.max_attempts} checks allowed"
            self._condition_failed(step, path, ConditionNotMet(step.key, attempt, why))
            return
        if deadline is not None and self.now >= deadline:
            why = f"timeout {step.timeout} passed"
            self._condition_failed(step, path, ConditionNotMet(step.key, attempt, why))
            return
        wake_at = self.now + condition_delay(step.every, step.backoff, step.cap, attempt)
        if deadline is not None and wake_at > deadline:
            wake_at = deadline  # the last check runs when the time is up
        wait = ConditionWait(
            key=step.key,
            attempts=attempt,
            state=state,
            first_check_at=first,
            max_attempts=step.max_attempts,
            deadline=deadline,
        )
        raise Suspend(Suspension("waiting-for-condition", path, wake_at, condition=wait))

    def _condition_failed(
        self,
        step: WaitForCondition,
        path: Path,
        error: ConditionCheckFailed | ConditionNotMet,
    ) -> None:
        """Fail the step, or with `catch` go on with the failure under its key."""
        if not step.catch:
            raise StepFailed(error, path)
        caught: dict[str, Any] = {"failed": True, "reason": error.reason}
        if isinstance(error, ConditionCheckFailed):
            caught["error"] = error.error_class
        caught["attempts"] = error.attempts
        self._store(step.key, caught)
