"""Whether a waiting run can go on at a place of another definition (a migration's
check, engine/run_migration.py): the place exists, the run's path leads there (a branch
entered by its arm, a for_each by its item, a retry by its attempt), and the step there
is the same kind of step waiting for the same thing under the same keys, so that what
the run recorded keeps its meaning where it resumes:

- a wait, for a wait (its wake time is the run's);
- a wait_for_event, for the same event type under the same result key (its match and
  timeout are the run's, as recorded);
- a wait_for_callback, under the same result key (its token stays valid);
- a wait_for_condition under the same key (its checks so far and their state come along;
  the next check is the target's);
- a retry, for a run waiting to retry one (its attempt count comes along);
- a task, mail or webhook with the same key and kind: an outcome recorded, or on its way,
  lands under the key the rest of the definition reads;
- a parallel with the same result key and the same task keys in order, of the same kinds;
- a call_workflow or map of the same child workflow under the same result key (its join
  and children are the run's).

Pure."""

from __future__ import annotations

from collections.abc import Sequence

from ..definition import (
    CallWorkflow,
    MailSend,
    Map,
    Parallel,
    Retry,
    Task,
    WaitForCallback,
    WaitForCondition,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
)
from ..definition.branches import family_base, family_name, static_place
from ..definition.dsl import Branch, ForEach, Step, Wait
from ..step_paths import describe_path
from ..step_requests import task_key
from ..stream import (
    ChildrenWaiting,
    Frame,
    Path,
    RetryScheduled,
    StepWaiting,
    StepWaitingForCallback,
    StepWaitingForCondition,
    StepWaitingForEvent,
    Suspension,
    TaskScheduled,
    TasksScheduled,
)


def _inner(step: Step, frame: Frame) -> Sequence[Step] | None:
    """The steps a path frame enters at `step` (None: it cannot enter it)."""
    if isinstance(step, Branch) and frame.get("arm") in ("true", "false"):
        return step.on_true if frame["arm"] == "true" else step.on_false
    if isinstance(step, ForEach) and "item" in frame:
        return step.do
    if isinstance(step, Retry) and "attempt" in frame:
        return step.do
    return None


def step_at_place(steps: Sequence[Step], path: Path) -> Step | None:
    """The step `path` leads to, entering each container the way its frame says (a
    branch by its arm, a for_each by its item, a retry by its attempt); None: none."""
    for depth, frame in enumerate(path):
        index = frame.get("i")
        if not isinstance(index, int) or not 0 <= index < len(steps):
            return None
        if depth == len(path) - 1:
            return steps[index]
        inner = _inner(steps[index], frame)
        if inner is None:
            return None
        steps = inner
    return None


def refusal(
    target: WorkflowDefinition,
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition,
    to: Path,
) -> str | None:
    """Why a run waiting at `suspension` cannot go on at `to` in `target` (None: it can):
    the place is missing, its path does not lead there, or the step there is not the same
    kind of step waiting for the same thing under the same keys."""
    place = f"v{target.version} {describe_path(to)}"
    step = step_at_place(target.steps, to)
    if step is None:
        return f"{place} does not exist (or the run's path does not lead there)"
    if isinstance(suspension, RetryScheduled):
        same = isinstance(step, Retry) and "attempt" in to[-1]
    elif isinstance(suspension, StepWaiting):
        same = isinstance(step, Wait)
    elif isinstance(suspension, StepWaitingForEvent):
        same = (
            isinstance(step, WaitForEvent)
            and target.awaits.get(step.event, step.event) == suspension.event_type
            and step.result_key == suspension.result_key
        )
    elif isinstance(suspension, StepWaitingForCallback):
        same = isinstance(step, WaitForCallback) and step.result_key == suspension.result_key
    elif isinstance(suspension, StepWaitingForCondition):
        same = isinstance(step, WaitForCondition) and step.key == suspension.key
    elif isinstance(suspension, TaskScheduled):
        same = (
            isinstance(step, (Task, MailSend, WebhookSend))
            and step.kind == suspension.step_kind
            and (isinstance(step, Task) or step.result_key is not None)
            and task_key(step) == suspension.task_key
        )
    elif isinstance(suspension, TasksScheduled):
        same = isinstance(step, Parallel) and _same_tasks(step, suspension)
    else:
        same = _same_join(step, suspension, target, to)
    if same:
        return None
    return (
        f"{place} is {describe_step(target, step)}; the run waits at {suspension_text(suspension)}"
    )


def _same_tasks(step: Parallel, suspension: TasksScheduled) -> bool:
    kinds = {
        task_key(sub): sub.kind
        for sub in step.steps
        if isinstance(sub, (Task, MailSend, WebhookSend))
    }
    return (
        step.result_key == suspension.result_key
        and tuple(kinds) == suspension.keys
        and all(kinds.get(t.task_key) == t.step_kind for t in suspension.tasks)
    )


def _same_join(
    step: Step, suspension: ChildrenWaiting, target: WorkflowDefinition, to: Path
) -> bool:
    family = family_base(suspension.child_workflow)
    if family is not None:  # a parallel of branches: as many, at the same place
        place = family_name(target.name, static_place(to), target.version)
        return (
            family == family_base(place)
            and isinstance(step, Parallel)
            and step.branches is not None
            and len(step.branches) == suspension.children
            and step.result_key == suspension.result_key
        )
    if suspension.join_kind == "call":
        kind_agrees = isinstance(step, CallWorkflow) and step.wait
    else:
        kind_agrees = isinstance(step, Map)
    return (
        kind_agrees
        and isinstance(step, (CallWorkflow, Map))
        and step.workflow == suspension.child_workflow
        and step.result_key == suspension.result_key
    )


def describe_step(definition: WorkflowDefinition, step: Step) -> str:
    """A step in words, with what a waiting run's kind depends on."""
    if isinstance(step, WaitForEvent):
        awaited = definition.awaits.get(step.event, step.event)
        return f"a wait_for_event for {awaited!r} under {step.result_key!r}"
    if isinstance(step, WaitForCallback):
        return f"a wait_for_callback under {step.result_key!r}"
    if isinstance(step, WaitForCondition):
        return f"a wait_for_condition under {step.key!r}"
    if isinstance(step, Task) or (isinstance(step, (MailSend, WebhookSend)) and step.result_key):
        assert isinstance(step, (Task, MailSend, WebhookSend))
        return f"a {step.kind} {task_key(step)!r}"
    if isinstance(step, Parallel) and step.branches is not None:
        return f"a parallel of {len(step.branches)} branch(es) under {step.result_key!r}"
    if isinstance(step, Parallel):
        keys = [task_key(s) for s in step.steps if isinstance(s, (Task, MailSend, WebhookSend))]
        return f"a parallel of {keys} under {step.result_key!r}"
    if isinstance(step, (CallWorkflow, Map)):
        return f"a {step.kind} of {step.workflow!r} under {step.result_key!r}"
    return f"a {step.kind}"


def suspension_text(
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition,
) -> str:
    """Where a run waits, in words (the step kind and what it waits for)."""
    if isinstance(suspension, StepWaitingForEvent):
        return f"a wait_for_event for {suspension.event_type!r} under {suspension.result_key!r}"
    if isinstance(suspension, StepWaitingForCallback):
        return f"a wait_for_callback under {suspension.result_key!r}"
    if isinstance(suspension, StepWaitingForCondition):
        return f"a wait_for_condition under {suspension.key!r} (after check {suspension.attempts})"
    if isinstance(suspension, RetryScheduled):
        return f"a retry (attempt {suspension.attempt} of {suspension.max_attempts} next)"
    if isinstance(suspension, TaskScheduled):
        return f"a {suspension.step_kind} {suspension.task_key!r}"
    if isinstance(suspension, TasksScheduled):
        return f"a parallel of {list(suspension.keys)} under {suspension.result_key!r}"
    if isinstance(suspension, ChildrenWaiting) and family_base(suspension.child_workflow):
        return f"a parallel of {suspension.children} branch(es) under {suspension.result_key!r}"
    if isinstance(suspension, ChildrenWaiting):
        kind = "call_workflow" if suspension.join_kind == "call" else "map"
        return f"a {kind} of {suspension.child_workflow!r} under {suspension.result_key!r}"
    return "a wait"


def describe_suspension(
    suspension: Suspension | StepWaitingForCallback | StepWaitingForCondition,
) -> str:
    """Where a run waits: its place and what waits there."""
    return f"{describe_path(suspension.entry_path)}: {suspension_text(suspension)}"
