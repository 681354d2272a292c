"""Cancel: an operator ends a run that has not settled; it never resumes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..errors import WorkflowRunnerError
from ..store import Store
from ..stream import RUN_STREAM, RunCancelled
from .passes import load_run

_MAX_ATTEMPTS = 10


class CancelContended(WorkflowRunnerError):
    """The run kept changing under the cancel (passes won every race)."""


@dataclass(frozen=True)
class CancelResult:
    outcome: Literal["cancelled", "already-cancelled", "already-settled"]
    tenant_id: str
    run_id: str
    status: str


def cancel_run(
    store: Store, tenant_id: str, run_id: str, now: datetime, reason: str | None = None
) -> CancelResult:
    """Cancel a run; idempotent. A cancelled run never resumes.

    Each attempt is one transaction appending `workflow.run-cancelled` at the stream's
    next version; a pass that appended first makes it try again on the new version.

    Raises:
        RunNotFound: the tenant has no such run.
        CancelContended: ten passes in a row won the race.
    """
    for _ in range(_MAX_ATTEMPTS):
        with store.transaction():
            state = load_run(store, tenant_id, run_id)
            if state.status == "cancelled":
                return CancelResult("already-cancelled", tenant_id, run_id, state.status)
            if state.settled:
                return CancelResult("already-settled", tenant_id, run_id, state.status)
            cancelled = RunCancelled(
                workflow_name=state.workflow_name,
                step_index=state.suspension.step_index if state.suspension else None,
                reason=reason or None,
            )
            if store.streams.append(tenant_id, run_id, RUN_STREAM, state.version, [cancelled], now):
                store.tasks.cancel_for_run(tenant_id, run_id, now)
                store.runs.upsert(
                    tenant_id,
                    run_id,
                    state.workflow_name,
                    "cancelled",
                    state.version + 1,
                    state.fingerprint,
                    state.trigger_event_type,
                    now,
                )
                return CancelResult("cancelled", tenant_id, run_id, "cancelled")
    raise CancelContended(f"run {run_id} kept changing; cancel did not get a turn")
