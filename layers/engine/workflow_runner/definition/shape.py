"""A definition's shape: what decides where a suspended run resumes and what it reads
back, without the values and code that only decide what the steps do.

The shape of a step is its kind, the keys it stores results under, the event it waits
for (its `awaits` name and event type), its task key (or a wait_for_condition's key),
the child workflow it starts, the callback it creates or awaits (its name), and the
shapes of the steps inside it; the shape of a definition is its trigger (kind and event
type) and its steps' shapes. A mail's subject, a URL, a duration, a retry's numbers, a
match, a condition's timing, and the code of resolvers, task functions and checks are
not shape.

A run suspended at a path resumes on a definition whose shape agrees with the one it
started on where the run has been and where it stands (`first_difference`): the steps
before its position in every list on its path (the results it recorded, and what makes
its path point at the same step), the containers it is inside, and the step it waits
at. What comes after its position is the new definition's: the new values and code
apply to the rest of the run, new steps after its position run, removed ones do not.
A change that would make the run resume at another place, or read back a result under
another key, is a difference, named by its step path; such a run fails loud
(`workflow_definition_changed`) instead of skipping or repeating a step.

The shape is stored with every registered definition (workflow_definitions): the
definition a run started on may be gone from the code that meets it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from .dsl import (
    AwaitCallback,
    Branch,
    CallTrigger,
    CallWorkflow,
    Compute,
    CreateCallback,
    CronTrigger,
    EventTrigger,
    ForEach,
    MailSend,
    Map,
    Parallel,
    Retry,
    Step,
    Task,
    WaitForCallback,
    WaitForCondition,
    WaitForEvent,
    WebhookSend,
    WorkflowDefinition,
)

Shape: TypeAlias = dict[str, Any]
Pinning: TypeAlias = Literal["shape", "exact"]
PINNINGS: tuple[Pinning, ...] = ("shape", "exact")


def shape_of(definition: WorkflowDefinition) -> Shape:
    """The shape of a definition: its trigger and its steps' shapes (JSON)."""
    trigger = definition.trigger
    if isinstance(trigger, EventTrigger):
        kind: dict[str, Any] = {"kind": "event", "eventType": trigger.event_type}
    elif isinstance(trigger, CronTrigger):
        kind = {"kind": "cron"}
    else:
        assert isinstance(trigger, CallTrigger)
        kind = {"kind": "call"}
    return {"trigger": kind, "steps": _steps(definition.steps, definition.awaits)}


def shape_hash(shape: Shape) -> str:
    """A short hash of a shape (definitions of one shape share it)."""
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _steps(steps: Sequence[Step], awaits: Mapping[str, str]) -> list[Shape]:
    return [_step(step, awaits) for step in steps]


def _step(step: Step, awaits: Mapping[str, str]) -> Shape:
    shape: Shape = {"kind": step.kind}
    if isinstance(step, Compute):
        shape["key"] = step.key
    elif isinstance(step, Branch):
        shape["onTrue"] = _steps(step.on_true, awaits)
        shape["onFalse"] = _steps(step.on_false, awaits)
    elif isinstance(step, ForEach):
        shape["as"] = step.as_
        shape["do"] = _steps(step.do, awaits)
    elif isinstance(step, Retry):
        shape["do"] = _steps(step.do, awaits)
    elif isinstance(step, WaitForEvent):
        shape["event"] = step.event
        shape["eventType"] = awaits.get(step.event, step.event)
        shape["resultKey"] = step.result_key
    elif isinstance(step, (MailSend, WebhookSend)):
        shape["key"] = step.key
        shape["resultKey"] = step.result_key
    elif isinstance(step, (Task, WaitForCondition)):
        shape["key"] = step.key
    elif isinstance(step, WaitForCallback):
        shape["resultKey"] = step.result_key
    elif isinstance(step, CreateCallback):
        shape["name"] = step.name
    elif isinstance(step, AwaitCallback):
        shape["name"] = step.name
        shape["resultKey"] = step.result_key
    elif isinstance(step, CallWorkflow):
        shape["workflow"] = step.workflow
        shape["resultKey"] = step.result_key
        shape["wait"] = step.wait
    elif isinstance(step, Map):
        shape["workflow"] = step.workflow
        shape["resultKey"] = step.result_key
    elif isinstance(step, Parallel):
        shape["resultKey"] = step.result_key
        shape["steps"] = _steps(step.steps, awaits)
        if step.branches is not None:  # only then: a parallel of tasks keeps its shape
            shape["branches"] = [_steps(lane, awaits) for lane in step.branches]
    return shape


# The lists a container holds, by the frame that enters one of them.
def _inner(container: Shape, frame: Mapping[str, Any]) -> list[Shape] | None:
    kind = container.get("kind")
    if kind == "branch":
        arm = frame.get("arm")
        return container.get("onTrue" if arm == "true" else "onFalse") if arm else None
    if kind in ("for_each", "retry"):
        return container.get("do")
    if kind == "parallel":  # a task of a parallel (the worker's path to it)
        return container.get("steps")
    return None


def first_difference(old: Shape, new: Shape, path: Sequence[Mapping[str, Any]]) -> str | None:
    """Where `new` disagrees with `old` for a run suspended at `path` (None: it resumes
    on `new`): the first step, by its path, that is not the same shape in both among
    the steps before the run's position, the containers it is inside and the step it
    waits at; or the trigger."""
    if old.get("trigger") != new.get("trigger"):
        return f"the trigger changed ({_trigger(old)} → {_trigger(new)})"
    old_steps: list[Shape] | None = old.get("steps") or []
    new_steps: list[Shape] | None = new.get("steps") or []
    where: list[str] = []
    for depth, frame in enumerate(path):
        assert old_steps is not None and new_steps is not None
        index = int(frame["i"])
        for before in range(index):
            was = old_steps[before] if before < len(old_steps) else None
            now = new_steps[before] if before < len(new_steps) else None
            if was != now:
                return _at([*where, _place(before, was or now)], _change(was, now))
        if index >= len(old_steps):
            return _at([*where, f"step {index}"], "the run's step is missing from its own shape")
        was = old_steps[index]
        now = new_steps[index] if index < len(new_steps) else None
        here = [*where, _place(index, was)]
        last = depth == len(path) - 1
        if last and not ("attempt" in frame and was.get("kind") == "retry"):
            if was != now:
                return _at(here, _change(was, now))
            return None
        # A container the run is inside (a retry it re-enters: its attempts run the new
        # steps; only its kind must agree).
        if now is None or now.get("kind") != was.get("kind") or now.get("as") != was.get("as"):
            return _at(here, _change(was, now))
        if last:
            return None
        old_steps, new_steps = _inner(was, frame), _inner(now, frame)
        if old_steps is None or new_steps is None:
            return _at(here, "the run's path does not lead into this step")
        if "arm" in frame:
            here[-1] += f" › on_{frame['arm']}"
        elif "item" in frame:
            here[-1] += f" › item {frame['item']}"
        elif "attempt" in frame:
            here[-1] += f" › attempt {frame['attempt']}"
        where = here
    return None


def _trigger(shape: Shape) -> str:
    trigger = shape.get("trigger") or {}
    if trigger.get("kind") == "event":
        return f"on_event({trigger.get('eventType')!r})"
    return f"on_{trigger.get('kind')}()"


def _place(index: int, step: Shape | None) -> str:
    kind = step.get("kind") if step else None
    return f"step {index} ({kind})" if kind else f"step {index}"


def _at(where: list[str], what: str) -> str:
    return f"{' › '.join(where)}: {what}"


def _change(was: Shape | None, now: Shape | None) -> str:
    if now is None:
        return "removed"
    if was is None:
        return f"added ({now.get('kind')})"
    if was.get("kind") != now.get("kind"):
        return f"{was.get('kind')} → {now.get('kind')}"
    for field in sorted(set(was) | set(now)):
        if was.get(field) != now.get(field) and not isinstance(was.get(field), list):
            return f"{field} {was.get(field)!r} → {now.get(field)!r}"
    for field in sorted(set(was) | set(now)):
        if was.get(field) != now.get(field):
            return f"the steps inside ({field}) changed"
    return "changed"
