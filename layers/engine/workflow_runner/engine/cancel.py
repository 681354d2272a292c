"""Cancel: an operator ends a run that has not settled; it never resumes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..errors import RunNotFound, WorkflowRunnerError
from ..store import Store
from .joins import cancel_in_transaction
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
    The run's running children (call_workflow, map) are cancelled with it, and theirs.

    Raises:
        RunNotFound: the tenant has no such run.
        CancelContended: ten passes in a row won the race.
    """
    for _ in range(_MAX_ATTEMPTS):
        with store.transaction():
            outcome = cancel_in_transaction(store, tenant_id, run_id, now, reason)
            if outcome == "missing":
                raise RunNotFound(tenant_id, run_id)
            if outcome == "already-cancelled":
                return CancelResult("already-cancelled", tenant_id, run_id, "cancelled")
            if outcome == "already-settled":
                state = load_run(store, tenant_id, run_id)
                return CancelResult("already-settled", tenant_id, run_id, state.status)
            if outcome == "cancelled":
                return CancelResult("cancelled", tenant_id, run_id, "cancelled")
    raise CancelContended(f"run {run_id} kept changing; cancel did not get a turn")
