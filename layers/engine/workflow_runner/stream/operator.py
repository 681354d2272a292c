"""An operator's action on a run, recorded on the run's stream as an audit fact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from ..fast_init import fast_init
from .names import OPERATOR_ACTION, optional

OperatorActionName: TypeAlias = Literal["cancel", "resume", "redrive", "redeliver"]


@fast_init
@dataclass(frozen=True, kw_only=True)
class OperatorAction:
    """An operator asked for `action` (console or CLI) and it took effect.

    Appended in the same transaction as the events of the engine operation that did the
    work (cancel, resume, redrive), right before them; an action that did not happen
    leaves no trace. The fold ignores it: it says who asked, not where the run stands.
    `by` names the operator and the tool (e.g. "console (ada@host)"); `step_index` is
    the suspension a resume asked for, `request_id` the delivery a redeliver sent again.
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
