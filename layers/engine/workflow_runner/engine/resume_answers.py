"""What a resume answers (ResumeResult), what it is asked (ResumeRequestItem), and the
answer for a pass the database refused: the run fails as pass_not_storable rather than
be retried forever (engine/resume.py calls it per item, after the batch failed)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from ..errors import StoreError, TransientStoreError
from ..fast_init import fast_init
from ..redaction import exception_for_log
from ..store import Store
from .passes import load_run_for_pass
from .persist import fail_run

log = logging.getLogger("workflow_runner")

ResumeOutcome = Literal[
    "already-resumed", "not-due", "suspended", "completed", "failed", "on-kept-version"
]
# The outcomes of a request whose pass ran (the others answer without one).
RAN = ("suspended", "completed", "failed")


@fast_init
@dataclass(frozen=True)
class ResumeResult:
    """The outcome of resume_run; never an exception for an expected outcome.

    `wake_at`: when the claimed suspension was due (None: a task without its outcome
    yet, reason waiting_for_task); `suspended_at` and `resumed_wake_at`: where and until
    when the pass suspended again; `task_id`: the task it suspended at, if any;
    `waiting_at`: set with `already-resumed` when the run waits at another step than the
    one asked for (a direct invoke reports it; a stale queue message is simply done);
    `kept_on`: the kept function version that has the run's definition — with
    `on-kept-version` nothing was done here and the request is for that version; with
    any other outcome, that version answered it.
    """

    outcome: ResumeOutcome
    tenant_id: str
    run_id: str
    step_index: int
    wake_at: datetime | None = None
    suspended_at: int | None = None
    reason: str | None = None
    resumed_wake_at: datetime | None = None
    task_id: str | None = None
    waiting_at: int | None = None
    kept_on: str | None = None


@fast_init
@dataclass(frozen=True)
class ResumeRequestItem:
    """One suspension to resume in `resume_runs`.

    `forwarded_from`: another version handed it here as the kept code of the run's
    definition; it is never handed on (a loop guard). `gone`: a kept version found gone
    (deleted) while handing it on, named if nothing else serves the run.
    """

    tenant_id: str
    run_id: str
    step_index: int
    force: bool = False
    forwarded_from: str | None = None
    gone: str | None = None


PASS_NOT_STORABLE = "pass_not_storable"


def fail_refused_pass(
    store: Store, item: ResumeRequestItem, now: datetime, error: StoreError
) -> ResumeResult | Exception:
    log.warning(
        "the database refused a pass; the run fails",
        extra={
            "tenant_id": item.tenant_id,
            "run_id": item.run_id,
            "detail": exception_for_log(error),
        },
    )
    base = ResumeResult("already-resumed", item.tenant_id, item.run_id, item.step_index)
    try:
        with store.transaction():
            state = load_run_for_pass(store, item.tenant_id, item.run_id, tail=True).state
            suspension = state.suspension
            if state.status != "waiting" or suspension is None:
                return base
            text = f"workflow step failed ({type(error).__name__})"
            step = suspension.step_index
            if fail_run(store, state, state.version, step, PASS_NOT_STORABLE, text, now):
                return replace(base, outcome="failed", reason=PASS_NOT_STORABLE)
            return base
    except TransientStoreError:
        raise
    except Exception as failure:
        return failure
