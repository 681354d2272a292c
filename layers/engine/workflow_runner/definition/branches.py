"""The branches of `s.parallel(branches=[[...], [...]])`: each branch runs as a child run
of an internal workflow, so that a branch may wait, call tasks or workflows and retry
with the durability, concurrency limit, cancellation and completion policy of a map.

For a parallel at static place `P` (its step indexes and branch arms, e.g. `2` or
`1.true.0`) of workflow `W`, branch `k` is the internal workflow `W/P/branch-k`: its
steps are the branch's steps, its trigger `on_call()`, its version, awaits, retention
and pinning `W`'s. It is registered with `W` (never on its own), it is not a workflow
anything else may start (call_workflow or map naming it finds no workflow), and its
fingerprint derives from `W`'s, so a changed `W` changes its branches' too.

The parallel step asks for a join of kind `map` over its branches whose child workflow
is the family `W/P/branch-*@vN` (N: `W`'s version): the worker starts item k on
`W/P/branch-k` of version N. Each branch's input is the parent's trigger event and
its results when the parallel started; a branch's ctx sees them as `ctx.event` and in
`ctx.steps` (under its own results), `ctx.workflow.map_index` is the branch's index.

A branch's result is the value its `s.branch_result(value)` step gives (the branch ends
there), else the value stored under the key of the branch's last top-level step that
stores one (None when none does): the key is static, so a branch that skips that step
(a branch arm not taken) yields None.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..durations import parse_instant
from .dsl import (
    Branch,
    CallTrigger,
    CallWorkflow,
    Compute,
    DomainEvent,
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

BRANCH_MARK = "/branch-"
_FAMILY = re.compile(r"^(?P<base>.+)/branch-\*@v(?P<version>\d+)$")


@dataclass(frozen=True)
class BranchOf:
    """What makes a definition a parallel's branch: its parent workflow, the parallel's
    static place, its index and the key its result is read from (None: no step stores
    one; a `branch_result` step still gives one)."""

    parent: str
    place: str
    index: int
    result_key: str | None


def static_place(path: Sequence[Mapping[str, Any]]) -> str:
    """A parallel's place without its run-time frames (item, attempt): `2`, `1.true.0`."""
    parts: list[str] = []
    for frame in path:
        parts.append(str(frame["i"]))
        if frame.get("arm") in ("true", "false"):
            parts.append(str(frame["arm"]))
    return ".".join(parts)


def branch_name(parent: str, place: str, index: int) -> str:
    return f"{parent}/{place}{BRANCH_MARK}{index}"


def family_name(parent: str, place: str, version: int) -> str:
    """The child workflow a parallel's join names: every branch of it, of one version."""
    return f"{parent}/{place}{BRANCH_MARK}*@v{version}"


def family_member(family: str, index: int) -> tuple[str, int] | None:
    """The branch workflow (name, version) item `index` of a join of `family` runs;
    None: `family` is an ordinary workflow name."""
    found = _FAMILY.match(family)
    if found is None:
        return None
    return f"{found['base']}{BRANCH_MARK}{index}", int(found["version"])


def family_base(family: str) -> str | None:
    """A family's name without its version (`W/P/branch-*`); None: not a family."""
    found = _FAMILY.match(family)
    return f"{found['base']}{BRANCH_MARK}*" if found else None


def is_branch_name(name: str) -> bool:
    return BRANCH_MARK in name


def result_key_of(steps: Sequence[Step]) -> str | None:
    """The key of the last top-level step that stores a result (a branch's result)."""
    for step in reversed(steps):
        key = stored_key(step)
        if key is not None:
            return key
    return None


def stored_key(step: Step) -> str | None:
    if isinstance(step, (Compute, Task, WaitForCondition)):
        return step.key
    if isinstance(step, (WaitForEvent, WaitForCallback)):
        return step.result_key
    if isinstance(step, (MailSend, WebhookSend)):
        return step.result_key or step.key
    if isinstance(step, (CallWorkflow, Map, Parallel)):
        return step.result_key
    return None


def parallels_with_branches(
    steps: Sequence[Step], prefix: tuple[str, ...] = ()
) -> list[tuple[str, Parallel]]:
    """Every parallel of branches in a step tree (not inside its branches), with its
    static place."""
    found: list[tuple[str, Parallel]] = []
    for index, step in enumerate(steps):
        here = (*prefix, str(index))
        if isinstance(step, Parallel) and step.branches is not None:
            found.append((".".join(here), step))
        elif isinstance(step, Branch):
            found += parallels_with_branches(step.on_true, (*here, "true"))
            found += parallels_with_branches(step.on_false, (*here, "false"))
        elif isinstance(step, (ForEach, Retry)):
            found += parallels_with_branches(step.do, here)
    return found


def branch_definitions(parent: WorkflowDefinition) -> list[WorkflowDefinition]:
    """The internal workflows of `parent`'s parallels of branches, nested ones too."""
    made: list[WorkflowDefinition] = []
    for place, parallel in parallels_with_branches(parent.steps):
        for index, steps in enumerate(parallel.branches or ()):
            name = branch_name(parent.name, place, index)
            digest = hashlib.sha256(f"{parent.fingerprint}|{name}".encode()).hexdigest()
            definition = WorkflowDefinition(
                name=name,
                trigger=CallTrigger(),
                steps=steps,
                idempotency_key=None,
                awaits=parent.awaits,
                version=parent.version,
                fingerprint=digest,
                description=f"branch {index} of the parallel at step {place} of {parent.name}",
                retention=parent.retention,
                pinning=parent.pinning,
                branch_of=BranchOf(parent.name, place, index, result_key_of(steps)),
            )
            made.append(definition)
            made += branch_definitions(definition)
    return made


# --- a branch's input -------------------------------------------------------------------


def branch_input(event: DomainEvent, results: Mapping[str, Any]) -> dict[str, Any]:
    """What a branch's run starts with: its parent's trigger event and results."""
    return {
        "event": {
            "id": event.id,
            "type": event.type,
            "payload": event.payload,
            "time": event.time.isoformat() if event.time else None,
            "source": event.source,
        },
        "steps": dict(results),
    }


def branch_context(
    event: DomainEvent, results: Mapping[str, Any]
) -> tuple[DomainEvent, dict[str, Any]]:
    """The event and results a branch's steps see: its parent's event, and its parent's
    results with the branch's own over them (its run's trigger is the branch input)."""
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    inherited = payload.get("event")
    if not isinstance(inherited, Mapping):
        return event, dict(results)
    time = inherited.get("time")
    parent_event = DomainEvent(
        id=str(inherited.get("id") or event.id),
        type=str(inherited.get("type") or event.type),
        payload=inherited.get("payload"),
        tenant_id=event.tenant_id,
        time=parse_instant(time) if isinstance(time, str) else event.time,
        source=str(inherited.get("source") or ""),
    )
    steps = payload.get("steps")
    return parent_event, {**(steps if isinstance(steps, Mapping) else {}), **results}


def shown_child(child_workflow: str, item_index: int, kind: str) -> tuple[str, str]:
    """A join's child as operators see it (workflow, step kind): a parallel's branch
    shows its own workflow and the step `parallel`, not its join's family and `map`."""
    member = family_member(child_workflow, item_index)
    return (member[0], "parallel") if member else (child_workflow, kind)
