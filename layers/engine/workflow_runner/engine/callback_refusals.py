"""Why a token's answer or heartbeat was not recorded (nothing was written): one word
each (`reason`), which the callback endpoint's status, `wfr`'s JSON and the test kit
carry."""

from __future__ import annotations

from datetime import datetime

from ..errors import WorkflowRunnerError


class CallbackRefused(WorkflowRunnerError):
    """An answer or heartbeat that did not happen; nothing was written. `reason` says why
    in one word (the endpoint's answer and `wfr`'s JSON carry it)."""

    reason = "refused"


class UnknownCallback(CallbackRefused):
    """No callback has this token (or the text is no token at all)."""

    reason = "unknown"

    def __init__(self) -> None:
        super().__init__("unknown callback token")


class CallbackAlreadyCompleted(CallbackRefused):
    """The token answered before (completed or failed); a token is single-use."""

    reason = "already_completed"

    def __init__(self) -> None:
        super().__init__("this callback was completed before (a token is single-use)")


class CallbackExpired(CallbackRefused):
    """The callback's deadline has passed (`timer`: its timeout, or its heartbeats
    stopped): the run goes on without the answer."""

    reason = "expired"

    def __init__(self, expired_at: datetime, timer: str = "timeout") -> None:
        why = ": no heartbeat came within its interval" if timer == "heartbeat_timeout" else ""
        super().__init__(f"this callback expired at {expired_at.isoformat()}{why}")
        self.expired_at = expired_at
        self.timer = timer


class CallbackNotWaiting(CallbackRefused):
    """The run no longer waits for this callback (it timed out, was resumed by an
    operator, or was cancelled, failed or erased; or the callback's name was created
    again)."""

    reason = "not_waiting"

    def __init__(self) -> None:
        super().__init__("the run no longer waits for this callback")


class NoHeartbeat(CallbackRefused):
    """A heartbeat to a callback whose step names no heartbeat interval."""

    reason = "no_heartbeat"

    def __init__(self) -> None:
        super().__init__("this callback takes no heartbeats (its step names no heartbeat interval)")
