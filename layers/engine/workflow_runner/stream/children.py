"""Facts about child runs on their parent's stream: the children a pass started
without waiting (start_workflow), and that a join's children settled.

A ChildrenSettled is appended by the transaction in which the join's last child (or
its first failure the parent does not catch) settled, while the parent waits at the
join's suspension: like a task outcome, it never races a pass for the next version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..fast_init import fast_init
from .names import CHILDREN_REQUESTED, CHILDREN_SETTLED, Path, optional


@fast_init
@dataclass(frozen=True, kw_only=True)
class ChildrenRequested:
    """A pass started child runs and went on (start_workflow): recorded, not awaited."""

    TYPE: ClassVar[str] = CHILDREN_REQUESTED

    join_id: str
    child_workflow: str
    child_run_ids: tuple[str, ...]
    step_index: int
    path: Path

    def to_payload(self) -> dict[str, Any]:
        return {
            "joinId": self.join_id,
            "childWorkflow": self.child_workflow,
            "childRunIds": list(self.child_run_ids),
            "stepIndex": self.step_index,
            "path": self.path,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ChildrenRequested:
        return cls(
            join_id=p["joinId"],
            child_workflow=p["childWorkflow"],
            child_run_ids=tuple(p.get("childRunIds") or ()),
            step_index=int(p.get("stepIndex", 0)),
            path=list(p.get("path") or []),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class ChildrenSettled:
    """The children of the open join settled (all of them, or `failed` > 0 and the
    parent does not catch, or its completion policy decided): the run is due. `reason`
    and `child_run_id` name the first failure, if any; `completion` is how a map with a
    completion policy ended (all_completed, min_successful_reached or
    failure_tolerance_exceeded)."""

    TYPE: ClassVar[str] = CHILDREN_SETTLED

    join_id: str
    suspension_version: int
    step_index: int
    settled: int
    failed: int
    reason: str | None = None
    child_run_id: str | None = None
    completion: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "joinId": self.join_id,
            "suspensionVersion": self.suspension_version,
            "stepIndex": self.step_index,
            "settled": self.settled,
            "failed": self.failed,
        }
        optional(payload, "reason", self.reason)
        optional(payload, "childRunId", self.child_run_id)
        optional(payload, "completion", self.completion)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> ChildrenSettled:
        return cls(
            join_id=p["joinId"],
            suspension_version=int(p["suspensionVersion"]),
            step_index=int(p.get("stepIndex", 0)),
            settled=int(p.get("settled", 0)),
            failed=int(p.get("failed", 0)),
            reason=p.get("reason"),
            child_run_id=p.get("childRunId"),
            completion=p.get("completion"),
        )
