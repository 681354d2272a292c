"""A list of steps as the builder takes it (a sequence of built steps, or of placeholders
for steps it refused)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import WorkflowDefinitionError
from .checks import Unbuilt
from .dsl import STEP_TYPES, Step


def as_steps(value: object, where: str) -> tuple[Step, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise WorkflowDefinitionError(f"{where} must be a list of steps")
    steps = tuple(value)
    for i, step in enumerate(steps):
        # Unbuilt: a step the builder refused, reported with its place once the tree is built.
        if not isinstance(step, (*STEP_TYPES, Unbuilt)):
            raise WorkflowDefinitionError(
                f"{where}[{i}] is not a step (got {type(step).__name__}); "
                "build steps with the builder passed to steps=lambda s: [...]"
            )
    return steps
