"""Callbacks: an outside system completes a run's wait_for_callback with its token.

The callback endpoint (`functions/callback`), `wfr callbacks complete`, the local
runtime and the test kit call `complete_callback`, then hand the run to the resume
queue at once (`enqueue_resume`), as the wakeup does for a matched event.

A token is the credential: it alone names the tenant, the run and the suspension it
completes (looked up by its SHA-256), so it can never reach another tenant's run or
another step's wait. One completion wins: the token's row is locked for the
completing transaction, and the completion is appended to the run stream at the
stream's next version only while the run still waits at that suspension without a
completion, so a second completion, a completion racing the timeout's resume, or one
after a cancel loses and writes nothing. A completion that is recorded is never lost:
it marks the pending row due in the same transaction, and the pending projection
marks it again when it projects the suspension after the completion.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ..callback_tokens import is_token, token_hash
from ..errors import InvalidInput, WorkflowRunnerError
from ..ports import ResumeQueue, ResumeRequest
from ..storable import DEFAULT_MAX_RESULT_BYTES, NotStorable, check_storable
from ..store import CallbackRow, Store
from ..stream import (
    CALLBACK_EVENT_TYPE,
    RUN_STREAM,
    CallbackCompleted,
    StepWaitingForCallback,
)
from .enqueue import DEFAULT_LEASE_SECONDS, enqueue_due
from .passes import load_run_for_pass

# The inbox id of a callback's payload: uuid5 of the token's hash (one per token).
CALLBACK_NAMESPACE = uuid.UUID("3b6a0f5e-2c4d-4e8a-9f61-7d2c5b8e1a93")
_APPEND_TRIES = 5

CallbackStatus = Literal["waiting", "completed", "expired", "closed"]


class CallbackRefused(WorkflowRunnerError):
    """A completion that did not happen; nothing was written. `reason` says why in one
    word (the endpoint's answer and `wfr`'s JSON carry it)."""

    reason = "refused"


class UnknownCallback(CallbackRefused):
    """No callback has this token (or the text is no token at all)."""

    reason = "unknown"

    def __init__(self) -> None:
        super().__init__("unknown callback token")


class CallbackAlreadyCompleted(CallbackRefused):
    """The token completed its wait before; a token is single-use."""

    reason = "already_completed"

    def __init__(self) -> None:
        super().__init__("this callback was completed before (a token is single-use)")


class CallbackExpired(CallbackRefused):
    """The wait's timeout has passed: the run goes on without the payload."""

    reason = "expired"

    def __init__(self, expired_at: datetime) -> None:
        super().__init__(f"this callback expired at {expired_at.isoformat()}")
        self.expired_at = expired_at


class CallbackNotWaiting(CallbackRefused):
    """The run no longer waits at the token's step (it timed out, was resumed by an
    operator, or was cancelled, failed or erased)."""

    reason = "not_waiting"

    def __init__(self) -> None:
        super().__init__("the run no longer waits for this callback")


@dataclass(frozen=True)
class CallbackCompletion:
    """A recorded completion: the run to resume and the inbox event holding the payload."""

    tenant_id: str
    run_id: str
    step_index: int
    workflow_name: str
    event_id: str


@dataclass(frozen=True)
class CallbackState:
    """A token a run handed out, as operators see it (never the token itself)."""

    row: CallbackRow
    status: CallbackStatus


def _checked_payload(payload: Any, max_bytes: int) -> None:
    if payload is None:
        raise InvalidInput(
            "callback payload: null is not a payload (a wait_for_callback's result is null "
            "only when it timed out); send a JSON value such as {}"
        )
    try:
        check_storable(payload, "callback payload", max_bytes)
    except NotStorable as error:
        raise InvalidInput(str(error)) from error


def _append_completion(store: Store, row: CallbackRow, event_id: str, now: datetime) -> bool:
    """Append the completion at the run stream's current version, in the caller's
    transaction, while the run still waits at the token's suspension without one;
    False when it does not (another writer won, or the run moved on)."""
    for _ in range(_APPEND_TRIES):
        state = load_run_for_pass(store, row.tenant_id, row.run_id, tail=True).state
        open_ = state.suspension
        if (
            not isinstance(open_, StepWaitingForCallback)
            or state.suspension_version != row.suspension_version
            or open_.token_hash != row.token_hash
            or state.matched_event_id is not None
        ):
            return False
        completed = CallbackCompleted(
            step_index=open_.step_index,
            suspension_version=row.suspension_version,
            event_id=event_id,
        )
        if store.streams.append(
            row.tenant_id, row.run_id, RUN_STREAM, state.version, [completed], now
        ):
            return True
    return False


def complete_callback(
    store: Store,
    token: str,
    payload: Any,
    now: datetime,
    source: str = "workflow-runner.callback",
    max_payload_bytes: int = DEFAULT_MAX_RESULT_BYTES,
) -> CallbackCompletion:
    """Complete the wait_for_callback a token belongs to with `payload`.

    One transaction: the payload becomes an inbox event of type `workflow.callback`
    (id: uuid5 of the token's hash), `workflow.callback.completed` is appended to the
    run stream, the token is marked used and the run's pending row due. The caller then
    enqueues the resume (`enqueue_resume`).

    Args:
        store: the database.
        token: the token `ctx.callback.token` handed out.
        payload: JSON (not null), at most `max_payload_bytes` as compact JSON.
        now: business time; a token is refused from its wait's timeout on.
        source: who completed it, stored as the inbox event's source.

    Returns:
        The completion: the run to resume and the payload's inbox event id.

    Raises:
        InvalidInput: the payload is null, not JSON or too large (nothing written).
        UnknownCallback: no callback has this token.
        CallbackAlreadyCompleted: the token was used before.
        CallbackExpired: the wait's timeout has passed.
        CallbackNotWaiting: the run no longer waits at the token's step.
    """
    if not isinstance(token, str) or not is_token(token):
        raise UnknownCallback()
    _checked_payload(payload, max_payload_bytes)
    hashed = token_hash(token)
    event_id = str(uuid.uuid5(CALLBACK_NAMESPACE, hashed))
    with store.transaction():
        row = store.callbacks.lock(hashed)
        if row is None:
            raise UnknownCallback()
        if row.completed_at is not None:
            raise CallbackAlreadyCompleted()
        if now >= row.expires_at:
            raise CallbackExpired(row.expires_at)
        if not _append_completion(store, row, event_id, now):
            raise CallbackNotWaiting()
        store.inbox.insert(row.tenant_id, event_id, source, CALLBACK_EVENT_TYPE, payload, now, now)
        store.callbacks.mark_completed(row.tenant_id, hashed, event_id, now)
        store.pending.mark_matched(
            row.tenant_id, row.run_id, row.suspension_version, CALLBACK_EVENT_TYPE, event_id, now
        )
    return CallbackCompletion(
        row.tenant_id, row.run_id, row.step_index, row.workflow_name, event_id
    )


def enqueue_resume(
    store: Store,
    queue: ResumeQueue,
    completion: CallbackCompletion,
    now: datetime,
    lease_seconds: int = DEFAULT_LEASE_SECONDS,
) -> bool:
    """Send a completed run to the resume queue at once; False when the queue refused
    it (its pending row is due, so the next due scan sends it)."""
    sent, _ = enqueue_due(store, queue, [completion], now, lease_seconds)
    if sent:
        return True
    # Not leased: its pending row is not projected yet, or already on its way. A second
    # request is harmless (the resume claims once).
    request = ResumeRequest(completion.tenant_id, completion.run_id, completion.step_index)
    return not queue.send([request])


def run_callbacks(store: Store, tenant_id: str, run_id: str, now: datetime) -> list[CallbackState]:
    """The callback tokens a run handed out, newest first, each with where it stands:
    waiting, completed, expired (its timeout passed, the run resumes without it) or
    closed (the run moved on without it: resumed by an operator, cancelled, failed).

    Raises:
        RunNotFound: the tenant has no such run.
    """
    state = load_run_for_pass(store, tenant_id, run_id, tail=True).state
    found: list[CallbackState] = []
    for row in store.callbacks.of_run(tenant_id, run_id):
        status: CallbackStatus
        if row.completed_at is not None:
            status = "completed"
        elif state.status != "waiting" or state.suspension_version != row.suspension_version:
            status = "closed"
        else:
            status = "expired" if now >= row.expires_at else "waiting"
        found.append(CallbackState(row, status))
    return found
