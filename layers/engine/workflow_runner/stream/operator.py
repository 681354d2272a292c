"""An operator's action on a run, recorded on the run's stream as an audit fact, and
the move of a waiting run onto another definition that a migration records."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias, TypeVar

from ..fast_init import fast_init
from .names import OPERATOR_ACTION, RUN_MIGRATED, Path, optional
from .suspensions import SuspensionFact

OperatorActionName: TypeAlias = Literal["cancel", "resume", "redrive", "redeliver", "migrate"]
S = TypeVar("S", bound=SuspensionFact)


@fast_init
@dataclass(frozen=True, kw_only=True)
class OperatorAction:
    """An operator asked for `action` (console or CLI) and it took effect.

    Appended in the same transaction as the events of the engine operation that did the
    work (cancel, resume, redrive, migrate), right before them; an action that did not
    happen leaves no trace. The fold ignores it: it says who asked, not where the run
    stands. `by` names the operator and the tool (e.g. "console (ada@host)");
    `step_index` is the suspension a resume asked for (the step a migrated run waited
    at), `request_id` the delivery a redeliver sent again.
    """

    TYPE: ClassVar[str] = OPERATOR_ACTION

    action: str
    by: str
    reason: str | None = None
    step_index: int | None = None
    request_id: str | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"action": self.action, "by": self.by}
        optional(payload, "reason", self.reason)
        optional(payload, "stepIndex", self.step_index)
        optional(payload, "requestId", self.request_id)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> OperatorAction:
        step = p.get("stepIndex")
        return cls(
            action=str(p.get("action", "")),
            by=str(p.get("by", "")),
            reason=p.get("reason"),
            step_index=int(step) if step is not None else None,
            request_id=p.get("requestId"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class RunMigrated:
    """An operator moved the run's open suspension (the one recorded at
    `suspension_version`) onto definition `to_fingerprint` (version `to_version` of its
    workflow), from `from_path` to `to_path` (engine/run_migration.py).

    The suspension keeps its version, so what refers to it by version stays valid (a
    callback token, a join, a task's outcome), and what it received stays received (the
    matched event, task outcomes, the children's end). The fold applies the move to the
    open suspension (`moved`); the pending projection moves the run's row. Appended
    right after the `workflow.operator-action` {action: "migrate"} that says who asked.
    A release that does not know this type skips it (UnknownFact): it would still see
    the run where it waited before (see docs/_drafts/runs-migrate.md, "During a deploy").
    """

    TYPE: ClassVar[str] = RUN_MIGRATED

    suspension_version: int
    from_fingerprint: str
    to_fingerprint: str
    to_version: int
    from_step_index: int
    to_step_index: int
    from_path: Path
    to_path: Path

    def moved(self, suspension: S) -> S:
        """`suspension` where this move puts it (on the new definition, at the new path)."""
        return dataclasses.replace(
            suspension,
            step_index=self.to_step_index,
            path=[dict(frame) for frame in self.to_path],
            definition_fingerprint=self.to_fingerprint,
        )

    def to_payload(self) -> dict[str, Any]:
        return {
            "suspensionVersion": self.suspension_version,
            "fromFingerprint": self.from_fingerprint,
            "toFingerprint": self.to_fingerprint,
            "toVersion": self.to_version,
            "fromStepIndex": self.from_step_index,
            "toStepIndex": self.to_step_index,
            "fromPath": self.from_path,
            "toPath": self.to_path,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> RunMigrated:
        return cls(
            suspension_version=int(p["suspensionVersion"]),
            from_fingerprint=str(p.get("fromFingerprint", "")),
            to_fingerprint=str(p["toFingerprint"]),
            to_version=int(p["toVersion"]),
            from_step_index=int(p["fromStepIndex"]),
            to_step_index=int(p["toStepIndex"]),
            from_path=list(p.get("fromPath") or []),
            to_path=list(p["toPath"]),
        )
