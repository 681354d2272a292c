"""The stand-in env.crash_task swaps in for a task's function (workflows.swap_task):
the worker dies during one attempt, as a Lambda timeout would end it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..definition import StepContext
from ..local.runtime import InvocationDied
from .workflows import TaskFn


def dying_at(attempt: int, key: str) -> Callable[[TaskFn], TaskFn]:
    """A task function's stand-in that, at attempt `attempt`, runs the function and then
    ends the worker's invocation before it records the outcome."""

    def swap(fn: TaskFn) -> TaskFn:
        def run(ctx: StepContext) -> Any:
            if ctx.workflow.retry_attempt != attempt:
                return fn(ctx)
            with contextlib.suppress(Exception):  # what it did stays done; its answer is lost
                fn(ctx)
            raise InvocationDied(f"the worker died during attempt {attempt} of task {key!r}")

        return run

    return swap
