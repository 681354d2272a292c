"""Callbacks: an outside system answers a run's callback with its token — completes it
with a payload, reports that it failed, or sends a heartbeat.

The callback endpoint (`functions/callback`), `wfr callbacks complete|fail|heartbeat`,
the local runtime and the test kit call `complete_callback`, `fail_callback` or
`heartbeat_callback`, then (for an answer the run waits for) hand the run to the resume
queue at once (`enqueue_resume`), as the wakeup does for a matched event. How one
writer wins: callback_answers.py.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ..callback_tokens import is_token, token_hash
from ..errors import InvalidInput
from ..ports import ResumeQueue, ResumeRequest
from ..redaction import detail_for_log, redacted_text
from ..storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
from ..store import CallbackRow, Store
from ..stream import (
    CALLBACK_EVENT_TYPE,
    CallbackCompleted,
    CallbackFailed,
    CallbackHeartbeat,
    Fact,
)
from .callback_answers import Appended, append_answer
from .callback_refusals import (
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotWaiting,
    CallbackRefused,
    NoHeartbeat,
    UnknownCallback,
)
from .enqueue import DEFAULT_LEASE_SECONDS, enqueue_due
from .passes import load_run_for_pass

__all__ = [
    "CallbackAlreadyCompleted",
    "CallbackCompletion",
    "CallbackExpired",
    "CallbackHeartbeatRecorded",
    "CallbackNotWaiting",
    "CallbackRefused",
    "CallbackState",
    "NoHeartbeat",
    "UnknownCallback",
    "checked_failure",
    "complete_callback",
    "enqueue_resume",
    "fail_callback",
    "heartbeat_callback",
    "open_callbacks",
    "run_callbacks",
]

log = logging.getLogger("workflow_runner")

# The inbox id of a callback's answer: uuid5 of the token's hash (one per token).
CALLBACK_NAMESPACE = uuid.UUID("3b6a0f5e-2c4d-4e8a-9f61-7d2c5b8e1a93")
# A failure's error name: what a run's failure and a caught result show (stored), so a
# short name without spaces, at signs or other room for personal data.
ERROR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
# A failure's message: only logged (redacted by default), never stored.
MAX_MESSAGE_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

CallbackStatus = Literal["waiting", "completed", "failed", "expired", "closed"]


@dataclass(frozen=True)
class CallbackCompletion:
    """A recorded answer (a completion or a failure): the run and the inbox event
    holding the payload; `run_due`: the run waits for it (resume it now), else a created
    callback answered before its await (kept for it)."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    event_id: str
    run_due: bool = True


@dataclass(frozen=True)
class CallbackHeartbeatRecorded:
    """A recorded heartbeat: the callback now takes answers until `deadline`."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    deadline: datetime


@dataclass(frozen=True)
class CallbackState:
    """A token a run handed out, as operators see it (never the token itself), with
    until when it takes answers."""

    row: CallbackRow
    status: CallbackStatus
    deadline: datetime


def _checked_payload(payload: Any, max_bytes: int) -> None:
    try:
        check_storable(payload, "callback payload", max_bytes)
    except NotStorable as error:
        raise InvalidInput(str(error)) from error


def checked_failure(error: Any, message: Any) -> tuple[str, str]:
    """A failure's error name and message as a caller sent them, or InvalidInput saying
    what is wrong: the name 1 to 64 letters, digits and `_.:-` (starting with a
    letter); the message text of at most 2000 characters without control characters
    (tabs and line breaks are fine), or None for none."""
    if not isinstance(error, str) or not ERROR_NAME.fullmatch(error):
        raise InvalidInput(
            f"callback failure: error {str(error)[:80]!r} is not an error name (1 to 64 "
            "letters, digits and _.:- starting with a letter, e.g. PaymentDeclined)"
        )
    if message is None:
        return error, ""
    if not isinstance(message, str):
        raise InvalidInput(f"callback failure: message is a {type(message).__name__}, not text")
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput(
            f"callback failure: message is {len(message)} characters, over the "
            f"{MAX_MESSAGE_CHARS}-character limit"
        )
    if _CONTROL.search(message):
        raise InvalidInput("callback failure: message holds control characters")
    return error, message


def _answer(
    store: Store,
    token: str,
    now: datetime,
    source: str,
    detail: Any,
    fact: Callable[[Appended, str, str], Fact],
    error: str | None = None,
) -> CallbackCompletion:
    """Record an answer: the fact on the run stream, its payload as an inbox event, the
    token used, and (when the run waits for it) the run's pending row due."""
    if not isinstance(token, str) or not is_token(token):
        raise UnknownCallback()
    hashed = token_hash(token)
    event_id = str(uuid.uuid5(CALLBACK_NAMESPACE, hashed))
    with store.transaction():
        at = append_answer(store, hashed, now, lambda a: fact(a, hashed, event_id))
        row = at.row
        store.inbox.insert(row.tenant_id, event_id, source, CALLBACK_EVENT_TYPE, detail, now, now)
        store.callbacks.mark_answered(row.tenant_id, hashed, event_id, now, error)
        if at.run_due:
            store.pending.mark_matched(
                row.tenant_id, row.run_id, at.suspension_version, CALLBACK_EVENT_TYPE, event_id, now
            )
    return CallbackCompletion(
        row.tenant_id, row.run_id, at.step_index, row.workflow_name, event_id, at.run_due
    )


def complete_callback(
    store: Store,
    token: str,
    payload: Any,
    now: datetime,
    source: str = "workflow-runner.callback",
    max_payload_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> CallbackCompletion:
    """Complete the callback a token belongs to with `payload`.

    One transaction: the payload becomes an inbox event of type `workflow.callback`
    (id: uuid5 of the token's hash), `workflow.callback.completed` is appended to the
    run stream, the token is marked used and, when the run waits for it, the run's
    pending row due. The caller then enqueues the resume (`enqueue_resume`).

    Args:
        store: the database.
        token: the token `ctx.callback.token` (or `ctx.callbacks[name].token`) handed out.
        payload: JSON, at most `max_payload_bytes` as compact JSON; null (no payload) is
            a success like any other, stored as null.
        now: business time; a token is refused from its callback's deadline on.
        source: who completed it, stored as the inbox event's source.

    Returns:
        The completion: the run and the payload's inbox event id.

    Raises:
        InvalidInput: the payload is not JSON or too large (nothing written).
        CallbackRefused: unknown token, answered before, expired, or the run no longer
            waits for it (see callback_refusals.py).
    """
    _checked_payload(payload, max_payload_bytes)

    def completed(at: Appended, hashed: str, event_id: str) -> CallbackCompleted:
        return CallbackCompleted(
            step_index=at.step_index,
            suspension_version=at.suspension_version,
            event_id=event_id,
            token_hash=hashed,
            name=at.row.name,
            run_due=at.run_due,
        )

    return _answer(store, token, now, source, payload, completed)


def fail_callback(
    store: Store,
    token: str,
    error: str,
    message: str | None,
    now: datetime,
    source: str = "workflow-runner.callback",
) -> CallbackCompletion:
    """Report that the work a callback stands for failed: the wait fails its run
    (reason callback_failed) or, with catch=True, finds `{"failed": true, "error":
    error}` under its result key.

    Recorded as a completion is (one transaction, the same token used up), as
    `workflow.callback.failed` with the error name and the message's redacted form
    (its hash, redaction.redacted_text); the message itself only reaches the log,
    under the log policy.

    Raises:
        InvalidInput: the error name or message is not what checked_failure takes.
        CallbackRefused: as complete_callback.
    """
    error, text = checked_failure(error, message)
    redacted = redacted_text(error, text)

    def failed(at: Appended, hashed: str, event_id: str) -> CallbackFailed:
        return CallbackFailed(
            step_index=at.step_index,
            suspension_version=at.suspension_version,
            event_id=event_id,
            token_hash=hashed,
            error=error,
            message=redacted,
            name=at.row.name,
            run_due=at.run_due,
        )

    detail = {"failed": True, "error": error}
    completion = _answer(store, token, now, source, detail, failed, error)
    log.info(
        "callback failed",
        extra={
            "tenant_id": completion.tenant_id,
            "run_id": completion.run_id,
            "detail": detail_for_log(f"{error}: {text}"),
        },
    )
    return completion


def _takes_heartbeats(row: CallbackRow) -> None:
    if row.heartbeat_seconds is None:
        raise NoHeartbeat()


def heartbeat_callback(store: Store, token: str, now: datetime) -> CallbackHeartbeatRecorded:
    """A heartbeat: the callback (whose step names a heartbeat interval) takes answers
    for that interval more from `now`, never past its timeout.

    One transaction: `workflow.callback.heartbeat` on the run stream with the new
    deadline, the token's last heartbeat, and (when the run waits for it) its pending
    row's time moved to the new deadline (never earlier). A heartbeat is no answer: the
    token stays open.

    Raises:
        CallbackRefused: unknown token, answered before, expired, the run no longer
            waits for it, or no heartbeat interval (NoHeartbeat).
    """
    if not isinstance(token, str) or not is_token(token):
        raise UnknownCallback()
    hashed = token_hash(token)

    def deadline_of(row: CallbackRow) -> datetime:
        assert row.heartbeat_seconds is not None
        return min(row.expires_at, now + timedelta(seconds=row.heartbeat_seconds))

    def beat(at: Appended) -> CallbackHeartbeat:
        return CallbackHeartbeat(
            step_index=at.step_index,
            suspension_version=at.suspension_version,
            token_hash=hashed,
            deadline=deadline_of(at.row),
            name=at.row.name,
            run_due=at.run_due,
        )

    with store.transaction():
        at = append_answer(store, hashed, now, beat, _takes_heartbeats)
        row = at.row
        deadline = deadline_of(row)
        store.callbacks.record_heartbeat(row.tenant_id, hashed, now)
        if at.run_due:
            store.pending.extend_wake(row.tenant_id, row.run_id, at.suspension_version, deadline)
    return CallbackHeartbeatRecorded(
        row.tenant_id, row.run_id, at.step_index, row.workflow_name, deadline
    )


def enqueue_resume(
    store: Store,
    queue: ResumeQueue,
    completion: CallbackCompletion,
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
) -> bool:
    """Send a run whose callback wait got its answer to the resume queue at once; False
    when the queue refused it (its pending row is due, so the next due scan sends it),
    or when the run does not wait for this answer yet (its await finds it)."""
    if not completion.run_due:
        return False
    sent, _ = enqueue_due(store, queue, [completion], now, lease_seconds)
    if sent:
        return True
    # Not leased: its pending row is not projected yet, or already on its way. A second
    # request is harmless (the resume claims once).
    request = ResumeRequest(completion.tenant_id, completion.run_id, completion.step_index)
    return not queue.send([request])


def _status(row: CallbackRow, waits_there: bool, now: datetime) -> CallbackStatus:
    """Where a token stands: answered, closed by the run, expired, or waiting."""
    if row.completed_at is not None:
        return "failed" if row.failed_error is not None else "completed"
    if row.closed_reason in ("timeout", "heartbeat_timeout"):
        return "expired"
    if row.closed_at is not None or not waits_there:
        return "closed"
    return "expired" if now >= row.deadline[0] else "waiting"


def run_callbacks(store: Store, tenant_id: str, run_id: str, now: datetime) -> list[CallbackState]:
    """The callback tokens a run handed out, newest first, each with where it stands:
    waiting (for its answer), completed, failed, expired (its deadline passed) or closed
    (the run moved on without it: resumed by an operator, cancelled, failed, ended; or
    its name was created again).

    Raises:
        RunNotFound: the tenant has no such run.
    """
    state = load_run_for_pass(store, tenant_id, run_id, tail=True).state
    found: list[CallbackState] = []
    for row in store.callbacks.of_run(tenant_id, run_id):
        if row.name is None:  # a wait_for_callback's: while the run waits there
            waits = state.status == "waiting" and state.suspension_version == row.suspension_version
        else:
            waits = state.status == "waiting"
        found.append(CallbackState(row, _status(row, waits, now), row.deadline[0]))
    return found


def open_callbacks(store: Store, tenant_id: str, now: datetime) -> list[CallbackState]:
    """A tenant's callbacks waiting for their answer (as the pending projection sees the
    runs), soonest deadline first."""
    return [
        CallbackState(row, _status(row, True, now), row.deadline[0])
        for row in store.callbacks.open_of_tenant(tenant_id)
    ]
