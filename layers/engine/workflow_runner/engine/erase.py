"""Erase a domain event: its payload and every copy the engine derived from it.

The run streams only reference their trigger and awaited events (invariant 8), but a
pass may have copied payload values into step results, match expressions, return
values and dispatch requests (a mail body, a webhook body). Erasure removes them all,
in one transaction:

- the inbox row keeps its key, type and times; ``detail`` becomes NULL, ``erased_at``
  is set, and the event is marked triggered and woken so a late redelivery of it
  starts or wakes nothing;
- every run that names the event as its trigger (``run-started.triggerEventRef``) or
  as a matched awaited event (``event-matched.eventId``) has the payload-derived
  fields of its events blanked (``results``, ``match``, ``result``; ``redacted: true``
  marks the rewritten events);
- those runs' dispatch requests are blanked; one not delivered yet is settled as
  ``step.dispatch-failed`` (error ``dispatch request erased``);
- those runs that are not settled yet fail at once with reason
  ``trigger_event_erased`` or ``awaited_event_erased`` instead of resuming later on a
  payload that is gone; their pending rows are dropped.

Rewriting stored events in place is the one sanctioned exception to the append-only
rule of the run streams (ARCHITECTURE §2.1, §2.8): a right to erasure outranks an
immutable history. The facts (which step ran, suspended, failed) stay; only the
personal data inside them goes.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import InvalidInput, WorkflowRunnerError
from ..store import Relation, Store
from ..stream import DISPATCH_STREAM, DispatchFailed
from .passes import load_run
from .persist import fail_run

log = logging.getLogger("workflow_runner.erase")

# How often the whole erasure is retried when a concurrent pass moved a run on.
_MAX_ATTEMPTS = 10


class EraseContended(WorkflowRunnerError):
    """Runs that reference the event kept changing under the erasure."""


class EventNotFound(WorkflowRunnerError):
    """The tenant has no stored domain event with this id."""

    def __init__(self, tenant_id: str, event_id: str) -> None:
        super().__init__(f"event {event_id!r} not found for tenant {tenant_id}")
        self.tenant_id = tenant_id
        self.event_id = event_id


@dataclass(frozen=True)
class EraseResult:
    """What an erasure did (a repeated erasure finds nothing left to do)."""

    tenant_id: str
    event_id: str
    already_erased: bool
    runs: list[str] = field(default_factory=list)  # runs whose copies were redacted
    failed_runs: dict[str, str] = field(default_factory=dict)  # run id -> failure reason
    events_redacted: int = 0
    dispatches_cancelled: int = 0


class _RunMoved(Exception):
    """A run's stream advanced while the erasure held its version: start over."""


def _validate(tenant_id: str, event_id: str) -> str:
    try:
        tenant = str(uuid.UUID(tenant_id))
    except (ValueError, AttributeError, TypeError) as error:
        shown = str(tenant_id)[:64]
        raise InvalidInput(f"erase_event: tenant id {shown!r} is not a UUID") from error
    if not isinstance(event_id, str) or not event_id or len(event_id) > 256:
        raise InvalidInput("erase_event: event id must be a non-empty string of at most 256 chars")
    return tenant


def erase_event(
    store: Store, tenant_id: str, event_id: str, now: datetime, reason: str | None = None
) -> EraseResult:
    """Erase one domain event of a tenant and every copy derived from it.

    One transaction; idempotent (erasing again redacts and fails nothing more).

    Args:
        store: the database.
        tenant_id: the event's tenant (a UUID).
        event_id: the EventBridge id the event was stored under.
        now: business time, recorded as ``erased_at`` and on the failure events.
        reason: why (e.g. a ticket reference); recorded on the failure events of the
            runs it ends, so an operator can tell an erasure from a bug.

    Returns:
        An EraseResult.

    Raises:
        InvalidInput: the tenant id is not a UUID or the event id is empty.
        EventNotFound: the tenant has no such event (nothing written).
    """
    tenant = _validate(tenant_id, event_id)
    for _ in range(_MAX_ATTEMPTS):
        try:
            with store.transaction():
                return _erase_once(store, tenant, event_id, now, reason)
        except _RunMoved:
            continue  # rolled back; the next attempt sees the run's new version
    raise EraseContended(f"erase_event: runs referencing {event_id} kept changing")


def _erase_once(
    store: Store, tenant_id: str, event_id: str, now: datetime, reason: str | None
) -> EraseResult:
    found, already = store.erasure.lock_event(tenant_id, event_id)
    if not found:
        raise EventNotFound(tenant_id, event_id)
    store.erasure.blank_event(tenant_id, event_id, now)
    relations: dict[str, Relation] = {}
    for run_id, relation in store.erasure.runs_referencing(tenant_id, event_id):
        # A run both triggered and woken by the event counts as triggered by it.
        if relations.get(run_id) != "trigger":
            relations[run_id] = relation
    run_ids = sorted(relations)
    result = EraseResult(tenant_id, event_id, already, runs=run_ids)
    if not run_ids:
        log.info("event erased", extra={"tenant_id": tenant_id, "event_id": event_id})
        return result
    failed: dict[str, str] = {}
    for run_id in run_ids:
        state = load_run(store, tenant_id, run_id)
        if state.settled:
            continue
        why = f"{relations[run_id]}_event_erased"
        step_index = state.suspension.step_index if state.suspension else 0
        text = f"the {relations[run_id]} event {event_id} of run {run_id} was erased"
        if reason:
            text = f"{text} ({reason})"
        if not fail_run(store, state, state.version, step_index, why, text, now):
            raise _RunMoved()
        failed[run_id] = why
    redacted = store.erasure.redact_run_events(tenant_id, run_ids)
    store.erasure.blank_results_and_tasks(tenant_id, run_ids)
    if failed:
        # Their pending rows copy match values of the erased event.
        store.pending.delete_runs([(tenant_id, run_id) for run_id in sorted(failed)])
    cancelled = 0
    for dispatch in store.erasure.open_dispatches(tenant_id, run_ids):
        # Version 2 of the dispatch stream is its outcome; a dispatcher that settled
        # it first wins and this append is a no-op.
        erased = DispatchFailed(
            step_kind=dispatch.step_kind, error="dispatch request erased", reason="event_erased"
        )
        if store.streams.append(tenant_id, dispatch.request_id, DISPATCH_STREAM, 1, [erased], now):
            cancelled += 1
    store.erasure.blank_dispatches(tenant_id, run_ids)
    store.erasure.blank_local_mail(tenant_id, run_ids)
    log.info(
        "event erased",
        extra={
            "tenant_id": tenant_id,
            "event_id": event_id,
            "runs": len(run_ids),
            "failed": len(failed),
            "reason": reason,
        },
    )
    return EraseResult(
        tenant_id,
        event_id,
        already,
        runs=run_ids,
        failed_runs=failed,
        events_redacted=redacted,
        dispatches_cancelled=cancelled,
    )


__all__ = ["EraseContended", "EraseResult", "EventNotFound", "erase_event"]
