"""Steps that hold steps: branch, for_each and retry. Their frames in a path say which
arm, item or attempt the steps inside run in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..definition.dsl import Branch, ForEach, Retry
from ..pass_result import InvalidArgument, RetryWait, Suspension, describe_step_error
from ..step_requests import backoff_delay
from ..stream import Frame, Path
from .base import PassState, StepFailed, Suspend


class ContainerSteps(PassState):
    def _run_branch(
        self,
        step: Branch,
        prefix: Path,
        index: int,
        head: Frame | None,
        rest: Path | None,
        scope: dict[str, Any],
    ) -> None:
        path = [*prefix, {"i": index}]
        if head is not None and head.get("arm") in ("true", "false"):
            arm = str(head["arm"])
        else:
            arm = "true" if self._call(step.if_, path, scope) else "false"
        steps = step.on_true if arm == "true" else step.on_false
        self._run_list(steps, [*prefix, {"i": index, "arm": arm}], rest or None, scope)

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
        except StepFailed as failed:
            if attempt >= step.times:
                raise
            self.callback.forget_from(len(self._attempts))  # the attempt's steps run again
            wake_at = self.now + backoff_delay(step, attempt, self.rng)
            wait = RetryWait(attempt, step.times, describe_step_error(failed.error))
            retry_path = [*prefix, {"i": index, "attempt": attempt + 1}]
            raise Suspend(Suspension("retry-scheduled", retry_path, wake_at, retry=wait)) from None
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
            raise StepFailed(
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
