"""The workflows a test environment runs: those its modules register, and the same
with a task's function swapped for a stand-in (`env.stub_task`)."""

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


def _with_task_fn(
    steps: tuple[Step, ...], key: str, fn: Callable[[StepContext], Any]
) -> tuple[tuple[Step, ...], int]:
    """`steps` with the function of every task `key` (nested ones too) replaced, and how
    many were."""
    replaced = 0
    out: list[Step] = []
    for step in steps:
        if isinstance(step, Task) and step.key == key:
            step = dataclasses.replace(step, fn=fn)
            replaced += 1
        elif isinstance(step, Branch):
            on_true, in_true = _with_task_fn(step.on_true, key, fn)
            on_false, in_false = _with_task_fn(step.on_false, key, fn)
            step = dataclasses.replace(step, on_true=on_true, on_false=on_false)
            replaced += in_true + in_false
        elif isinstance(step, (ForEach, Retry)):
            do, inside = _with_task_fn(step.do, key, fn)
            step = dataclasses.replace(step, do=do)
            replaced += inside
        elif isinstance(step, Parallel):
            tasks, inside = _with_task_fn(step.steps, key, fn)
            step = dataclasses.replace(step, steps=tasks)
            replaced += inside
        out.append(step)
    return tuple(out), replaced


def with_stubbed_task(
    registry: WorkflowRegistry,
    key: str,
    fn: Callable[[StepContext], Any],
    workflow: str | None = None,
) -> WorkflowRegistry:
    """The registry with the function of every task `key` (of `workflow`, or of every
    workflow) replaced by `fn`; the definitions keep their fingerprints.

    Raises:
        ValueError: no such task (the message offers the closest task keys).
    """
    stubbed = WorkflowRegistry()
    replaced = 0
    for definition in registry:
        if workflow is None or definition.name == workflow:
            steps, count = _with_task_fn(definition.steps, key, fn)
            definition = dataclasses.replace(definition, steps=steps)
            replaced += count
        stubbed.register(definition)
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
        where = f"workflow {workflow!r} has no" if workflow else "no registered workflow has a"
        raise ValueError(
            f"stub_task: {where} task {key!r}{did_you_mean(key, keys)} "
            f"(task keys: {listing(keys)})"
        )
    return stubbed
