"""Facts of a wait_for_callback: the suspension and the completion that ends it.

The completion is appended while the run waits at the suspension (optimistic
concurrency on the stream's next version), so it races only the timeout's resume and
other completions: whichever appends first decides, the others lose the version.
Its payload is not copied here: it is an inbox row of type `workflow.callback`
(`event_id`), referenced like an awaited event, so erasing that event erases it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..durations import format_instant
from ..fast_init import fast_init
from .names import instant
from .suspensions import SuspensionFact

STEP_WAITING_FOR_CALLBACK = "workflow.callback.waiting"
CALLBACK_COMPLETED = "workflow.callback.completed"
# The inbox type of a callback's payload (never routed by EventBridge).
CALLBACK_EVENT_TYPE = "workflow.callback"


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepWaitingForCallback(SuspensionFact):
    """Suspended at a `wait_for_callback` until its token completes it or `timeout_at`.

    `token_hash` is the SHA-256 of the token the pass handed out (never the token).
    """

    TYPE: ClassVar[str] = STEP_WAITING_FOR_CALLBACK

    result_key: str
    token_hash: str
    timeout_at: datetime

    @property
    def due_at(self) -> datetime:
        return self.timeout_at

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "resultKey": self.result_key,
            "tokenHash": self.token_hash,
            "timeoutAt": format_instant(self.timeout_at),
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaitingForCallback:
        return cls(
            **cls._common_fields(p),
            result_key=p["resultKey"],
            token_hash=p["tokenHash"],
            timeout_at=instant(p["timeoutAt"]),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallbackCompleted:
    """A token completed the wait at `suspension_version`; its payload is the inbox
    event `event_id`. The first one recorded for a suspension wins."""

    TYPE: ClassVar[str] = CALLBACK_COMPLETED

    step_index: int
    suspension_version: int
    event_id: str

    def to_payload(self) -> dict[str, Any]:
        return {
            "stepIndex": self.step_index,
            "suspensionVersion": self.suspension_version,
            "eventId": self.event_id,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CallbackCompleted:
        return cls(
            step_index=int(p.get("stepIndex") or 0),
            suspension_version=int(p["suspensionVersion"]),
            event_id=str(p["eventId"]),
        )
