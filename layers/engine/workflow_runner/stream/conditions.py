"""The fact of a wait_for_condition: its checkpoint between two checks.

Each check that returns Continue ends its pass with this suspension, in the pass's
transaction: the number of checks done, the state the next check receives, and when it
runs (`wake_at`, a timer like a wait's). A check that is cut off before its pass commits
left nothing, so the resume repeats only that check, with the state recorded here.
`condition_state` is derived from the run's data: an erasure blanks it as it blanks
results (`redacted`).

Added after release 0.3: a release that does not know the type decodes it as
UnknownFact (see the deploy note in docs/deploying/migrations.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..durations import format_instant
from ..fast_init import fast_init
from .names import instant, optional
from .suspensions import SuspensionFact

STEP_WAITING_FOR_CONDITION = "workflow.condition.waiting"


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepWaitingForCondition(SuspensionFact):
    """Suspended at a `wait_for_condition` after check `attempts` returned Continue; the
    next check runs at `wake_at` with `condition_state`. `first_check_at` is when the
    first check ran (a timeout counts from it); `timeout_at` that deadline, if any."""

    TYPE: ClassVar[str] = STEP_WAITING_FOR_CONDITION

    key: str
    attempts: int
    condition_state: Any
    wake_at: datetime
    first_check_at: datetime
    max_attempts: int | None = None
    timeout_at: datetime | None = None

    @property
    def due_at(self) -> datetime:
        return self.wake_at

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self._common(),
            "key": self.key,
            "attempts": self.attempts,
            "conditionState": self.condition_state,
            "wakeAt": format_instant(self.wake_at),
            "firstCheckAt": format_instant(self.first_check_at),
        }
        optional(payload, "maxAttempts", self.max_attempts)
        if self.timeout_at is not None:
            payload["timeoutAt"] = format_instant(self.timeout_at)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaitingForCondition:
        timeout_at = p.get("timeoutAt")
        max_attempts = p.get("maxAttempts")
        return cls(
            **cls._common_fields(p),
            key=p["key"],
            attempts=int(p["attempts"]),
            condition_state=p.get("conditionState"),
            wake_at=instant(p["wakeAt"]),
            first_check_at=instant(p.get("firstCheckAt") or p["wakeAt"]),
            max_attempts=None if max_attempts is None else int(max_attempts),
            timeout_at=instant(timeout_at) if timeout_at else None,
        )
