"""Facts of callbacks: a wait_for_callback's or await_callback's suspension, a callback a
create_callback step made, and what its token brought: a completion, a failure, a
heartbeat.

Every answer is appended at the run stream's next version (optimistic concurrency), so
answers of one run, a timeout's resume and a pass take turns: whichever appends first
decides, the others lose the version and look again. An answer's payload is not copied
here: it is an inbox row of type `workflow.callback` (`event_id`; a failure's row holds
`{"failed": true, "error": NAME}`), referenced like an awaited event, so erasing that
event erases it. A failure's message is never stored: `message` is its redacted form
(`NAME (text hash 3f2a9c1b)`, redaction.redacted_text).

`run_due` says whether the answer settles the open suspension (the run waits for this
very callback): a created callback answered before its await is recorded with
`run_due` false and found at the await (in the `callbacks` table, written in the same
transaction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from ..durations import format_instant
from ..fast_init import fast_init
from .names import Path, instant, optional
from .suspensions import SuspensionFact

STEP_WAITING_FOR_CALLBACK = "workflow.callback.waiting"
CALLBACK_COMPLETED = "workflow.callback.completed"
CALLBACK_FAILED = "workflow.callback.failed"
CALLBACK_HEARTBEAT = "workflow.callback.heartbeat"
CALLBACK_CREATED = "workflow.callback.created"
# The inbox type of a callback's payload (never routed by EventBridge).
CALLBACK_EVENT_TYPE = "workflow.callback"

# Which timer ended a callback wait that got no answer.
CallbackTimer = Literal["timeout", "heartbeat_timeout"]


def callback_deadline(
    timeout_at: datetime, heartbeat_seconds: int | None, last_beat: datetime
) -> tuple[datetime, CallbackTimer]:
    """Until when a callback takes answers, and which timer ends it then: its timeout, or
    `heartbeat_seconds` after its last heartbeat (`last_beat`: or its creation) when that
    comes first."""
    if heartbeat_seconds is not None:
        beat = last_beat + timedelta(seconds=heartbeat_seconds)
        if beat < timeout_at:
            return beat, "heartbeat_timeout"
    return timeout_at, "timeout"


def _optional_instant(payload: dict[str, Any], key: str, value: datetime | None) -> None:
    optional(payload, key, None if value is None else format_instant(value))


@fast_init
@dataclass(frozen=True, kw_only=True)
class StepWaitingForCallback(SuspensionFact):
    """Suspended at a `wait_for_callback` (or an `await_callback` of the created callback
    `name`) until its token answers or `due_at` passes.

    `token_hash` is the SHA-256 of the token (never the token). With a heartbeat
    interval, `heartbeat_at` is the instant by which the next heartbeat must arrive;
    each heartbeat moves it (CallbackHeartbeat), never past `timeout_at`.
    """

    TYPE: ClassVar[str] = STEP_WAITING_FOR_CALLBACK

    result_key: str
    token_hash: str
    timeout_at: datetime
    name: str | None = None
    heartbeat_seconds: int | None = None
    heartbeat_at: datetime | None = None

    @property
    def due_at(self) -> datetime:
        if self.heartbeat_at is not None and self.heartbeat_at < self.timeout_at:
            return self.heartbeat_at
        return self.timeout_at

    @property
    def timer(self) -> CallbackTimer:
        """The timer that runs out first: the heartbeat's or the wait's own timeout."""
        if self.heartbeat_at is not None and self.heartbeat_at < self.timeout_at:
            return "heartbeat_timeout"
        return "timeout"

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self._common(),
            "resultKey": self.result_key,
            "tokenHash": self.token_hash,
            "timeoutAt": format_instant(self.timeout_at),
        }
        optional(payload, "name", self.name)
        optional(payload, "heartbeatSeconds", self.heartbeat_seconds)
        _optional_instant(payload, "heartbeatAt", self.heartbeat_at)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StepWaitingForCallback:
        return cls(
            **cls._common_fields(p),
            result_key=p["resultKey"],
            token_hash=p["tokenHash"],
            timeout_at=instant(p["timeoutAt"]),
            name=p.get("name"),
            heartbeat_seconds=p.get("heartbeatSeconds"),
            heartbeat_at=instant(p["heartbeatAt"]) if p.get("heartbeatAt") else None,
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class _TokenFact:
    """What every fact a token brings says: the step and the suspension open when it was
    recorded (`run_due`: the one it settles, or moves; a created callback's answer kept
    for its await names none, 0), and the created callback's `name`."""

    step_index: int
    suspension_version: int
    name: str | None = None
    run_due: bool = True

    def _common(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "stepIndex": self.step_index,
            "suspensionVersion": self.suspension_version,
        }
        optional(payload, "name", self.name)
        if not self.run_due:
            payload["runDue"] = False
        return payload

    @staticmethod
    def _common_fields(p: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "step_index": int(p.get("stepIndex") or 0),
            "suspension_version": int(p["suspensionVersion"]),
            "name": p.get("name"),
            "run_due": bool(p.get("runDue", True)),
        }


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallbackCompleted(_TokenFact):
    """A token completed its callback; its payload is the inbox event `event_id`. The
    first answer recorded for a suspension wins."""

    TYPE: ClassVar[str] = CALLBACK_COMPLETED

    event_id: str
    token_hash: str | None = None  # None: recorded before callbacks could be created

    def to_payload(self) -> dict[str, Any]:
        payload = {**self._common(), "eventId": self.event_id}
        optional(payload, "tokenHash", self.token_hash)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CallbackCompleted:
        return cls(
            **cls._common_fields(p), event_id=str(p["eventId"]), token_hash=p.get("tokenHash")
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallbackFailed(_TokenFact):
    """A token reported its callback failed with error `error` (a short name the outside
    system chose); `event_id` holds `{"failed": true, "error": error}`. The wait fails
    the run (reason callback_failed) unless it catches."""

    TYPE: ClassVar[str] = CALLBACK_FAILED

    event_id: str
    token_hash: str
    error: str
    message: str  # redacted: the error name and a hash of the text, never the text

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "eventId": self.event_id,
            "tokenHash": self.token_hash,
            "error": self.error,
            "message": self.message,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CallbackFailed:
        return cls(
            **cls._common_fields(p),
            event_id=str(p["eventId"]),
            token_hash=str(p["tokenHash"]),
            error=str(p["error"]),
            message=str(p.get("message", "")),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallbackHeartbeat(_TokenFact):
    """A token's heartbeat: its callback's deadline is now `deadline` (the heartbeat
    interval from now, never past the callback's timeout). `run_due`: the run waits for
    this callback, so its suspension's timer moves (never earlier)."""

    TYPE: ClassVar[str] = CALLBACK_HEARTBEAT

    token_hash: str
    deadline: datetime

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._common(),
            "tokenHash": self.token_hash,
            "deadline": format_instant(self.deadline),
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CallbackHeartbeat:
        return cls(
            **cls._common_fields(p),
            token_hash=str(p["tokenHash"]),
            deadline=instant(p["deadline"]),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class CallbackCreated:
    """A create_callback step made callback `name` (its token's SHA-256), open until
    `timeout_at` and, with a heartbeat interval, as long as heartbeats keep coming.
    Recorded before the pass's outcome, which stays the stream's last event."""

    TYPE: ClassVar[str] = CALLBACK_CREATED

    step_index: int
    path: Path
    name: str
    token_hash: str
    timeout_at: datetime
    heartbeat_seconds: int | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "stepIndex": self.step_index,
            "path": self.path,
            "name": self.name,
            "tokenHash": self.token_hash,
            "timeoutAt": format_instant(self.timeout_at),
        }
        optional(payload, "heartbeatSeconds", self.heartbeat_seconds)
        return payload

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> CallbackCreated:
        return cls(
            step_index=int(p.get("stepIndex") or 0),
            path=list(p.get("path") or []),
            name=str(p["name"]),
            token_hash=str(p["tokenHash"]),
            timeout_at=instant(p["timeoutAt"]),
            heartbeat_seconds=p.get("heartbeatSeconds"),
        )


# A callback's answer that settles a wait (what the fold and the projection look at).
CallbackAnswer = CallbackCompleted | CallbackFailed
