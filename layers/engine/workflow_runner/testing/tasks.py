"""Swapping a task's function in registered definitions, for the test kit's stub_task
and crash_task: the definition keeps its fingerprint, so runs stay pinned to it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from ..definition import Branch, ForEach, Parallel, Retry, Step, StepContext, WorkflowRegistry
from ..definition.dsl import Task
from ..local.runtime import InvocationDied

TaskFn = Callable[[StepContext], Any]


def with_task_fn(
    steps: tuple[Step, ...], key: str, swap: Callable[[TaskFn], TaskFn]
) -> tuple[tuple[Step, ...], int]:
    """`steps` with the function of every task `key` (nested ones too) replaced by
    `swap(its function)`, and how many were."""
    replaced = 0
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Task) and step.key == key:
            step = dataclasses.replace(step, fn=swap(step.fn))
            replaced += 1
        elif isinstance(step, Branch):
            on_true, in_true = with_task_fn(step.on_true, key, swap)
            on_false, in_false = with_task_fn(step.on_false, key, swap)
            step = dataclasses.replace(step, on_true=on_true, on_false=on_false)
            replaced += in_true + in_false
        elif isinstance(step, (ForEach, Retry)):
            do, inside = with_task_fn(step.do, key, swap)
            step = dataclasses.replace(step, do=do)
            replaced += inside
        elif isinstance(step, Parallel):
            tasks, inside = with_task_fn(step.steps, key, swap)
            lanes = None
            if step.branches is not None:  # a parallel's branches run their own runs
                swapped = [with_task_fn(lane, key, swap) for lane in step.branches]
                lanes = tuple(lane for lane, _ in swapped)
                inside += sum(count for _, count in swapped)
            step = dataclasses.replace(step, steps=tasks, branches=lanes)
            replaced += inside
        out.append(step)
    return tuple(out), replaced


def swap_task(
    registry: WorkflowRegistry,
    where: str,
    key: str,
    swap: Callable[[TaskFn], TaskFn],
    workflow: str | None,
) -> WorkflowRegistry:
    """A registry whose task `key` (in `workflow`, or in every workflow) runs
    `swap(its function)`.

    Raises:
        ValueError: no registered workflow has a task with this key (`where` names the
            kit's method in the message).
    """
    swapped = WorkflowRegistry()
    replaced = 0
    for definition in registry:
        if definition.branch_of is not None:
            continue  # registered again with its parent (whose branches hold the swap)
        if workflow is None or definition.name == workflow:
            steps, count = with_task_fn(definition.steps, key, swap)
            definition = dataclasses.replace(definition, steps=steps)
            replaced += count
        swapped.register(definition)
    if not replaced:
        named = f"workflow {workflow!r}" if workflow else "any registered workflow"
        raise ValueError(f"{where}: {named} has no task {key!r}")
    return swapped


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
