"""The checks of `s.parallel`'s arguments, and the Parallel step they build (the tasks
form, or branches of steps: definition/branches.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import WorkflowDefinitionError
from .checks import Unbuilt
from .completion import Completion
from .dsl import MAX_MAP_CONCURRENCY, MailSend, Parallel, Step, Task, WebhookSend
from .step_lists import as_steps


def build_parallel(
    tasks: Sequence[Step],
    branches: Sequence[Sequence[Step]] | None,
    max_concurrency: int | None,
    result_key: str | None,
    completion: Completion | None,
    catch: bool,
) -> Parallel:
    """The Parallel step of `s.parallel(...)`, its arguments checked."""
    if branches is not None and tasks:
        raise WorkflowDefinitionError(
            "parallel: give tasks as arguments or branches=[[...], ...], not both"
        )
    if branches is not None:
        if isinstance(branches, (str, bytes)) or not isinstance(branches, Sequence):
            raise WorkflowDefinitionError("parallel: branches must be a list of step lists")
        lanes = tuple(as_steps(b, f"parallel: branches[{k}]") for k, b in enumerate(branches))
        for k, lane in enumerate(lanes):
            if not lane:
                raise WorkflowDefinitionError(f"parallel: branches[{k}] has no steps")
    elif not tasks:
        lanes = ()  # s.parallel(): nothing to run, completes with []
    else:
        lanes = None
    if max_concurrency is not None:
        if lanes is None:
            raise WorkflowDefinitionError(
                "parallel: max_concurrency applies to branches=[...] (tasks all run at once)"
            )
        if (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or not 1 <= max_concurrency <= MAX_MAP_CONCURRENCY
        ):
            raise WorkflowDefinitionError(
                "parallel: max_concurrency must be an integer from 1 to "
                f"{MAX_MAP_CONCURRENCY}, not {max_concurrency!r}"
            )
    for i, task in enumerate(tasks):
        if isinstance(task, Task) or (
            isinstance(task, (MailSend, WebhookSend)) and task.result_key is not None
        ):
            continue
        if isinstance(task, Unbuilt):
            continue
        raise WorkflowDefinitionError(
            f"parallel: argument {i} is a {getattr(task, 'kind', type(task).__name__)} "
            "step; give s.task(...) or mail_send/webhook_send with result_key= "
            "(or any steps as branches=[[...], ...])"
        )
    if result_key is not None and (not isinstance(result_key, str) or not result_key):
        raise WorkflowDefinitionError("parallel: result_key must be a non-empty string")
    if completion is not None and not isinstance(completion, Completion):
        raise WorkflowDefinitionError(
            f"parallel: completion must be a Completion(...), not {type(completion).__name__}"
        )
    needed = completion.min_successful if completion is not None else None
    count = len(lanes) if lanes is not None else len(tasks)
    if needed is not None and needed > count and lanes is None:
        raise WorkflowDefinitionError(
            f"parallel: completion needs {needed} tasks to succeed, but it has {count}"
        )
    if needed is not None and needed > count:
        raise WorkflowDefinitionError(
            f"parallel: completion needs {needed} branches to succeed, but it has {count}"
        )
    if not isinstance(catch, bool):
        raise WorkflowDefinitionError("parallel: catch must be True or False")
    if catch and completion is None:
        raise WorkflowDefinitionError(
            "parallel: catch=True needs completion=Completion(...) (without one, each "
            "task catches its own failure: s.task(..., catch=True))"
        )
    if lanes is not None:
        return Parallel(
            steps=(),
            result_key=result_key,
            completion=completion,
            catch=catch,
            branches=lanes,
            max_concurrency=max_concurrency,
        )
    return Parallel(steps=tuple(tasks), result_key=result_key, completion=completion, catch=catch)
