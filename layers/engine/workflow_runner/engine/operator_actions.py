"""Operator actions (console and CLI): cancel, resume now, redrive, redeliver — each
recorded on the run's stream as who asked for it, in the transaction of the engine
operation that does the work.

The audit fact `workflow.operator-action` {action, by, reason} is appended right before
the operation's own events; an action that did not happen (the run was already settled,
not due, resumed by someone else, or the redrive was refused) rolls it back, so the
stream only ever says what an operator actually did. The operations themselves are the
ones the functions and `wfr` always used: `cancel_run`, `resume_run`, `redrive_run`,
`deliveries.redeliver`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from ..definition import WorkflowRegistry
from ..definition.hosts import REGISTERED_HOSTS, DefinitionHosts
from ..errors import TransientStoreError, WorkflowRunnerError
from ..store import Store
from ..stream import RUN_STREAM, OperatorAction, RunState
from .cancel import CancelResult, cancel_run
from .deliveries import RedeliveryRefused, RedeliveryResult, redeliver
from .passes import load_run
from .redrive import RedriveResult, redrive_run
from .resume import ResumeResult, resume_run
from .resume_answers import RAN

_MAX_ATTEMPTS = 10
T = TypeVar("T")
log = logging.getLogger("workflow_runner")


class ActionContended(WorkflowRunnerError):
    """The run kept changing under the action (passes won every race)."""


@dataclass(frozen=True)
class Operator:
    """Who asks (e.g. "console (ada@laptop)") and why (optional, recorded as given)."""

    by: str
    reason: str | None = None


@dataclass(frozen=True)
class ActionResult(Generic[T]):
    """What the engine operation answered, whether the action took effect (and was
    recorded), and where the run stood before it (status, open suspension's step)."""

    result: T
    happened: bool
    status_before: str
    waiting_at: int | None


class _NothingHappened(Exception):
    """Rolls the audit fact back with the rest of the transaction."""


def _recorded(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    action: Callable[[RunState], OperatorAction],
    operate: Callable[[RunState], T],
    happened: Callable[[T], bool],
    lock_first: Callable[[], object] | None = None,
) -> ActionResult[T]:
    """`lock_first`: what the operation locks before it appends to the run's stream,
    locked before the audit fact too, so that the action takes its locks in the
    operation's order.

    A transaction the server rolled back to break a deadlock (or a serialization
    failure) runs again, as a queue redelivers a worker's: a cancel cascades through
    children whose passes lock the same rows in the order their own writes need, so an
    operator can lose such a race, and nothing of the attempt is left. Not inside the
    caller's transaction, whose own work the rollback took with it."""
    retry_lost_races = not store.in_transaction
    for attempt in range(_MAX_ATTEMPTS):
        outcome: T | None = None
        state: RunState | None = None
        try:
            with store.transaction():
                if lock_first is not None:
                    lock_first()
                state = load_run(store, tenant_id, run_id)
                fact = action(state)
                if not store.streams.append(
                    tenant_id, run_id, RUN_STREAM, state.version, [fact], now
                ):
                    continue  # a pass appended first: look again at the new version
                outcome = operate(state)
                if not happened(outcome):
                    raise _NothingHappened
                return ActionResult(outcome, True, state.status, _waiting_at(state))
        except _NothingHappened:
            assert outcome is not None and state is not None
            return ActionResult(outcome, False, state.status, _waiting_at(state))
        except TransientStoreError as error:
            if not (retry_lost_races and error.lost_race) or attempt == _MAX_ATTEMPTS - 1:
                raise
            log.info("operator action lost a race, trying again", extra={"run_id": run_id})
    raise ActionContended(f"run {run_id} kept changing; the action did not get a turn")


def _waiting_at(state: RunState) -> int | None:
    return state.suspension.step_index if state.suspension is not None else None


def cancel_as_operator(
    store: Store, tenant_id: str, run_id: str, now: datetime, operator: Operator
) -> ActionResult[CancelResult]:
    """Cancel a run and record who did (`happened`: it was not settled before).

    Raises:
        RunNotFound: the tenant has no such run.
    """
    return _recorded(
        store,
        tenant_id,
        run_id,
        now,
        lambda state: OperatorAction(action="cancel", by=operator.by, reason=operator.reason),
        lambda state: cancel_run(store, tenant_id, run_id, now, reason=operator.reason),
        lambda result: result.outcome == "cancelled",
        # The run's open joins, as cancel_in_transaction locks them: the worker locks a
        # join before it tells the join's parent (an append to this stream).
        lambda: store.children.lock_open_joins(tenant_id, run_id),
    )


def resume_as_operator(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    operator: Operator,
    registry: WorkflowRegistry,
    step_index: int | None = None,
    force: bool = False,
    hosts: DefinitionHosts | None = REGISTERED_HOSTS,
) -> ActionResult[ResumeResult]:
    """Resume a suspended run now (`force`: before its time) and record who did.

    `step_index` None resumes the open suspension; a step the run is not waiting at
    does nothing (`happened` False; `waiting_at` says where it waits); nor does a run
    whose definition only a kept function version has (`on-kept-version`: the
    deployment's ResumeRun hands it there). `hosts`: where kept code is found.

    Raises:
        RunNotFound: the tenant has no such run.
    """

    def operate(state: RunState) -> ResumeResult:
        step = step_index if step_index is not None else (_waiting_at(state) or 0)
        return resume_run(
            store, tenant_id, run_id, step, now, force=force, registry=registry, hosts=hosts
        )

    return _recorded(
        store,
        tenant_id,
        run_id,
        now,
        lambda state: OperatorAction(
            action="resume",
            by=operator.by,
            reason=operator.reason,
            step_index=step_index if step_index is not None else _waiting_at(state),
        ),
        operate,
        lambda result: result.outcome in RAN,
    )


def redrive_as_operator(
    store: Store,
    tenant_id: str,
    run_id: str,
    now: datetime,
    operator: Operator,
    registry: WorkflowRegistry,
) -> ActionResult[RedriveResult]:
    """Redrive a failed run and record who did; the redriven pass may fail again
    (`result.outcome`), the redrive still happened.

    Raises:
        RunNotFound: the tenant has no such run.
        RedriveRefused: the run cannot be redriven (nothing written, no audit fact).
    """
    return _recorded(
        store,
        tenant_id,
        run_id,
        now,
        lambda state: OperatorAction(action="redrive", by=operator.by, reason=operator.reason),
        lambda state: redrive_run(store, tenant_id, run_id, now, registry=registry),
        lambda result: True,
    )


def redeliver_as_operator(
    store: Store, tenant_id: str, request_id: str, now: datetime, operator: Operator
) -> ActionResult[RedeliveryResult]:
    """Deliver a failed fire-and-forget request again and record who asked on the
    stream of the run that requested it (its summary's version follows the stream).

    Raises:
        RedeliveryRefused: no such failed request with a stored payload (nothing written).
    """
    row = store.outbox.get(tenant_id, request_id)
    if row is None:
        raise RedeliveryRefused(f"no delivery {request_id} for tenant {tenant_id}")

    def operate(state: RunState) -> RedeliveryResult:
        result = redeliver(store, tenant_id, request_id, now)
        # The audit fact moved the run's stream on: keep its summary's version in step.
        store.runs.upsert(
            tenant_id,
            state.run_id,
            state.workflow_name,
            "running" if state.status == "missing" else state.status,
            state.version + 1,
            state.fingerprint,
            state.trigger_event_type,
            now,
        )
        return result

    return _recorded(
        store,
        tenant_id,
        row.run_id,
        now,
        lambda state: OperatorAction(
            action="redeliver", by=operator.by, reason=operator.reason, request_id=request_id
        ),
        operate,
        lambda result: True,
    )
