"""Steps that wait: for a time, for a domain event (an outside system's callback:
callbacks.py). Each suspends the pass; the resume re-enters after it (an awaited
payload seeded under its result key by the caller)."""

from __future__ import annotations

from typing import Any

from ..definition.dsl import Wait, WaitForEvent
from ..pass_result import InvalidArgument, Suspension
from ..step_requests import event_wait
from ..stream import Path
from .base import PassState, StepFailed, Suspend


class WaitSteps(PassState):
    def _wait(self, step: Wait, path: Path, scope: dict[str, Any]) -> None:
        raw = step.for_ if step.for_ is not None else step.until
        argument = "for_" if step.for_ is not None else "until"
        wake_at = self._wake_at(self._call(raw, path, scope), path, argument)
        raise Suspend(Suspension("waiting", path, wake_at))

    def _wait_for_event(self, step: WaitForEvent, path: Path, scope: dict[str, Any]) -> None:
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
            raise StepFailed(error, path) from error
        raise Suspend(Suspension("waiting-for-event", path, timeout_at, event=wait))
