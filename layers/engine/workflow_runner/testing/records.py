"""What a test looks at: a run as its stream records it, the mail and webhooks the
workflows sent, and the stand-in that answers webhooks (stubbable per URL)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..pass_result import TASK_FAILED_REASON
from ..ports import HttpResponse
from ..storable import NotStorable
from ..store import LoggedLine, Store, StoredEvent
from ..stream import (
    CALLBACK_EVENT_TYPE,
    RETURNED_FAILURE,
    RunCompleted,
    RunFailed,
    StepWaitingForCallback,
    StepWaitingForEvent,
    fold_run,
)
from ..timeline import describe_event, shown_payload


@dataclass(frozen=True)
class RunEvent:
    """One event of a run's stream (as `wfr runs show --json` lists it), with its
    one-line description (`text`)."""

    version: int
    type: str
    payload: dict[str, Any]
    recorded_at: datetime
    text: str


@dataclass(frozen=True)
class RunSnapshot:
    """A run as its stream records it when `env.run(...)` was called.

    Attributes:
        status: running, waiting, completed, failed or cancelled (the words of
            `wfr runs show --json`).
        steps: every step result by key, as the engine keeps them for the next pass
            (awaited payloads included, None after a timeout), with those the pass that
            failed the run computed.
        result: the returned value of a completed run or of a returned failure.
        reason, error: why a failed run failed (`reason` e.g. returned_failure or
            invalid_argument:timeout) and the stored generic error text
            (`workflow step failed (ValueError)`: stored events never carry more).
        error_detail: the text behind `error`, from the local runtime's log: the
            exception's class and message (`ValueError: card declined`), or for a value
            that could not be stored, the key, the place inside it and its type.
        log: every line the local runtime logged about the run, oldest first (failed
            task attempts with their text, refused webhooks, the failed step).
        waiting_for: the event type a waiting run waits for (`workflow.callback` at a
            wait_for_callback; None: not waiting for an event).
        wake_at: when a waiting run is due (its timer, timeout or next retry).
        definition_fingerprint: the definition the run is pinned to.
        events: every event of the stream, oldest first.
    """

    run_id: str
    tenant_id: str
    workflow: str
    status: str
    steps: dict[str, Any]
    result: Any
    reason: str | None
    error: str | None
    waiting_for: str | None
    wake_at: datetime | None
    definition_fingerprint: str
    events: list[RunEvent]
    error_detail: str | None = None
    log: list[str] = field(default_factory=list)

    @property
    def event_types(self) -> list[str]:
        """The stream's event types, oldest first."""
        return [e.type for e in self.events]


def _recorded_steps(
    store: Store, tenant_id: str, run_id: str, events: Sequence[StoredEvent]
) -> dict[str, Any]:
    steps = dict(store.results.of_run(tenant_id, run_id).values)
    for event in events:
        fact = event.fact
        if isinstance(fact, RunFailed):
            # A failed pass's results stay on its event (a redrive repeats the pass).
            steps.update(fact.results_delta or {})
            for key, event_id in (fact.awaited_refs_delta or {}).items():
                row = store.inbox.get(tenant_id, event_id) if event_id else None
                steps[key] = row.detail if row is not None else None
    return steps


def snapshot(store: Store, tenant_id: str, run_id: str, events: list[StoredEvent]) -> RunSnapshot:
    """A RunSnapshot from a run's stored stream (`events`, oldest first, not empty)."""
    state = fold_run(run_id, tenant_id, [e.recorded for e in events])
    result: Any = None
    reason = error = None
    for event in events:
        fact = event.fact
        if isinstance(fact, RunCompleted):
            result = fact.result
        elif isinstance(fact, RunFailed):
            reason, error = fact.reason, fact.error
            result = fact.result if fact.reason == RETURNED_FAILURE else None
    suspension = state.suspension
    logged = store.local.log_of_run(tenant_id, run_id)
    return RunSnapshot(
        run_id=run_id,
        tenant_id=tenant_id,
        workflow=state.workflow_name,
        status=state.status,
        steps=_recorded_steps(store, tenant_id, run_id, events),
        result=result,
        reason=reason,
        error=error,
        waiting_for=_waiting_for(suspension),
        wake_at=state.wake_at,
        definition_fingerprint=state.fingerprint,
        events=[
            RunEvent(e.version, e.type, shown_payload(e), e.recorded_at, describe_event(e))
            for e in events
        ],
        error_detail=_error_detail(error, reason, logged),
        log=[line.text for line in logged],
    )


def _error_detail(
    error: str | None, reason: str | None, logged: Sequence[LoggedLine]
) -> str | None:
    """The text behind a failed run's stored error: the last line about a task when a
    task failed it (the run's own line only says that the task failed), else the last
    line about the run."""
    if error is None or reason == RETURNED_FAILURE:
        return None
    if reason in (TASK_FAILED_REASON, NotStorable.reason):
        logged = [line for line in logged if line.task_key is not None] or logged
    return logged[-1].detail if logged else None


def _waiting_for(suspension: object) -> str | None:
    if isinstance(suspension, StepWaitingForEvent):
        return suspension.event_type
    return CALLBACK_EVENT_TYPE if isinstance(suspension, StepWaitingForCallback) else None


@dataclass(frozen=True)
class SentMail:
    """A mail the step dispatcher delivered (captured, never sent)."""

    to: list[str]
    subject: str
    body: str
    sender: str
    request_id: str
    sent_at: datetime


@dataclass(frozen=True)
class SentWebhook:
    """One delivery attempt of a webhook, and the status it was answered with (None:
    the connection failed)."""

    method: str
    url: str
    headers: dict[str, str]
    body: Any
    idempotency_key: str
    status: int | None
    sent_at: datetime


@dataclass
class StubbedHttp:
    """The HTTP side of webhooks in a test: records every request and answers 200, or
    what `stub` set for the URL (a list of statuses used in turn, the last one repeating;
    None: the connection fails)."""

    now: Callable[[], datetime]
    sent: list[SentWebhook] = field(default_factory=list)
    _stubs: dict[str, list[int | None]] = field(default_factory=dict)

    def stub(self, url: str, statuses: Sequence[int | None]) -> None:
        """Answer requests to `url` (a trailing `*`: every URL with that prefix) with
        `statuses` in turn, the last one repeating."""
        if not statuses:
            raise ValueError("stub_webhook: give at least one status")
        self._stubs[url] = list(statuses)

    def _next_status(self, url: str) -> int | None:
        key = url if url in self._stubs else None
        if key is None:
            prefixes = [k for k in self._stubs if k.endswith("*") and url.startswith(k[:-1])]
            key = max(prefixes, key=len) if prefixes else None
        if key is None:
            return 200
        statuses = self._stubs[key]
        return statuses.pop(0) if len(statuses) > 1 else statuses[0]

    def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout: float
    ) -> HttpResponse:
        status = self._next_status(url)
        try:
            decoded: Any = json.loads(body) if body else None
        except ValueError:
            decoded = body.decode(errors="replace")
        self.sent.append(
            SentWebhook(
                method,
                url,
                dict(headers),
                decoded,
                headers.get("idempotency-key", ""),
                status,
                self.now(),
            )
        )
        if status is None:
            raise ConnectionRefusedError(f"stubbed connection failure for {url}")
        return HttpResponse(status)
