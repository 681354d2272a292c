"""The fact that a map or a parallel ended before all its items did: which items it
stopped, and why.

A map stops when the worker counts the child whose outcome decides it (its completion
policy reached `min_successful` or exceeded a tolerance, or, without a policy, a child
failed and the map does not catch): in that transaction its children not started never
start, its running ones are cancelled (a child another owner still needs keeps
running), and this fact is appended to the parent's stream just before the
ChildrenSettled that wakes it. A parallel stops when the task worker records the
outcome that decides it: its tasks without an outcome are cancelled (a running attempt
finishes and its outcome is not recorded), and this fact follows that outcome. Either
way it is appended while the run waits at the suspension (`suspension_version`), so it
never races a pass for the stream's next version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..fast_init import fast_init
from .names import Path, optional

STEP_STOPPED = "workflow.step.stopped"


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepStopped:
    """A map or parallel at `step_index` ended early (`reason`: its completion,
    min_successful_reached or failure_tolerance_exceeded, or child_failed /
    task_failed without a policy).

    Map: `cancelled` are the item indexes of the running children it cancelled, `kept`
    those it left running for another owner (a second parent's join, a start_workflow,
    the event that started the run), `not_started` how many never started. Parallel:
    `cancelled` are the indexes of the tasks it stopped, `task_keys` their keys.
    """

    TYPE: ClassVar[str] = STEP_STOPPED

    kind: Literal["map", "parallel"]
    step_index: int
    path: Path
    suspension_version: int
    reason: str
    join_id: str | None = None
    cancelled: tuple[int, ...] = ()
    kept: tuple[int, ...] = ()
    not_started: int = 0
    task_keys: tuple[str, ...] = ()

    @property
    def stopped_items(self) -> frozenset[int]:
        """The items the stop ended while they ran (not those that never started)."""
        return frozenset(self.cancelled) | frozenset(self.kept)

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "kind": self.kind,
            "stepIndex": self.step_index,
            "path": self.path,
            "suspensionVersion": self.suspension_version,
            "reason": self.reason,
            "cancelled": list(self.cancelled),
        }
        optional(payload, "joinId", self.join_id)
        if self.kept:
            payload["kept"] = list(self.kept)
        if self.not_started:
            payload["notStarted"] = self.not_started
        if self.task_keys:
            payload["taskKeys"] = list(self.task_keys)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepStopped:
        return cls(
            kind="parallel" if p.get("kind") == "parallel" else "map",
            step_index=int(p.get("stepIndex", 0)),
            path=list(p.get("path") or []),
            suspension_version=int(p["suspensionVersion"]),
            reason=str(p.get("reason", "")),
            join_id=p.get("joinId"),
            cancelled=tuple(int(i) for i in p.get("cancelled") or ()),
            kept=tuple(int(i) for i in p.get("kept") or ()),
            not_started=int(p.get("notStarted") or 0),
            task_keys=tuple(str(k) for k in p.get("taskKeys") or ()),
        )
