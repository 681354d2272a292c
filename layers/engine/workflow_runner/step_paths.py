"""Where a path points in a workflow's step tree (paths are stored on run streams:
a resume, a redrive and the task worker find their step with them). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from .definition.dsl import Branch, ForEach, Parallel, Retry, Step
from .pass_result import WorkflowStepError
from .stream import Path


def step_at(steps: Sequence[Step], path: Path) -> Step:
    """Return the step a path points to.

    Raises:
        WorkflowStepError: the path does not fit this step tree.
    """
    current: Sequence[Step] = steps
    step: Step | None = None
    for depth, frame in enumerate(path):
        index = frame.get("i")
        if not isinstance(index, int) or not 0 <= index < len(current):
            raise WorkflowStepError(f"path {path} does not fit the workflow's steps")
        step = current[index]
        if depth == len(path) - 1:
            break
        if isinstance(step, Branch):
            current = step.on_true if frame.get("arm") == "true" else step.on_false
        elif isinstance(step, (ForEach, Retry)):
            current = step.do
        elif isinstance(step, Parallel):
            current = step.steps
        else:
            raise WorkflowStepError(f"path {path} enters a step that has no sub-steps")
    if step is None:
        raise WorkflowStepError("empty path")
    return step


def describe_path(path: Path) -> str:
    """A path in words: `step 2 › on_true › step 0`, `step 1 › item 3 › step 0`."""
    words: list[str] = []
    for frame in path:
        words.append(f"step {frame.get('i')}")
        if "arm" in frame:
            words.append(f"on_{frame['arm']}")
        elif "item" in frame:
            words.append(f"item {frame['item']}")
        elif "attempt" in frame:
            words.append(f"attempt {frame['attempt']}")
    return " › ".join(words)
