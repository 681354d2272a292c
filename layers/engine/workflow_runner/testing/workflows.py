"""The workflows a test environment runs: those its modules register, and the same
with a task's function swapped for a stand-in (`env.stub_task`, `env.crash_task`)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from ..definition import (
    Branch,
    ForEach,
    Parallel,
    Retry,
    Step,
    StepContext,
    WorkflowDefinition,
    WorkflowRegistry,
    default_registry,
)
from ..definition.dsl import Task, walk_steps
from ..errors import WorkflowDefinitionError
from ..suggest import did_you_mean, listing


def registry_of(
    modules: Sequence[str] = (), workflows: Sequence[WorkflowDefinition] = ()
) -> WorkflowRegistry:
    """The workflows the modules register when imported (as WORKFLOW_MODULES would load
    them), plus `workflows`.

    Raises:
        WorkflowDefinitionError: a module cannot be imported, or registers no workflow.
    """
    registry = WorkflowRegistry()
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise WorkflowDefinitionError(
                f"module {module!r} cannot be imported: {error}"
            ) from error
        found = default_registry().defined_in(module)
        if not found:
            raise WorkflowDefinitionError(
                f"module {module!r} registers no workflow (define_workflow(...) at import)"
            )
        for definition in found:
            registry.register(definition)
    for definition in workflows:
        registry.register(definition)
    return registry


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
    workflow: str | None = None,
) -> WorkflowRegistry:
    """The registry with the function of every task `key` (of `workflow`, or of every
    workflow) replaced by `swap(its function)` (env.stub_task, env.crash_task); the
    definitions keep their fingerprints.

    Raises:
        ValueError: no such task (`where` names the kit's method; the message offers the
            closest task keys).
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
        keys = sorted(
            {
                step.key
                for d in registry
                if workflow is None or d.name == workflow
                for step in walk_steps(d.steps)
                if isinstance(step, Task)
            }
        )
        named = f"workflow {workflow!r} has no" if workflow else "no registered workflow has a"
        raise ValueError(
            f"{where}: {named} task {key!r}{did_you_mean(key, keys)} (task keys: {listing(keys)})"
        )
    return swapped
