"""A workflow and worker entry points for the real-process-kill tests (run as
`python -m tests.reliability.killable MODE DB_URL` in a child process)."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime, timedelta

from workflow_runner import define_workflow, on_event
from workflow_runner import engine as ops
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.dsl import StepContext
from workflow_runner.store import connect

from tests.support import TENANT_A as TENANT

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _maybe_die(ctx: StepContext) -> int:
    # SIGKILL in the middle of the pass: its transaction is open, nothing is committed.
    if os.environ.get("WFR_KILL_IN_PASS") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return int(ctx.event.payload["n"])


killable = define_workflow(
    name="killable",
    trigger=on_event("kill.me"),
    idempotency_key=lambda e: str(e.payload["n"]),
    register=False,
    steps=lambda s: [
        s.mail_send(to="ops@example.com", subject="s", body="b"),
        s.compute("n", _maybe_die),
        s.wait(for_="PT1M"),
        s.compute("again", _maybe_die),
        s.return_(lambda ctx: {"n": ctx.steps["n"]}),
    ],
)


def registry() -> WorkflowRegistry:
    r = WorkflowRegistry()
    r.register(killable)
    return r


def main() -> None:
    mode, db_url = sys.argv[1], sys.argv[2]
    store = connect(db_url)
    reg = registry()
    from workflow_runner.definition.dsl import DomainEvent

    if mode == "ingest":
        ops.ingest_domain_event(
            store, DomainEvent("kill-0", "kill.me", {"n": 0}, TENANT, source="t"), NOW, reg
        )
    elif mode == "resume-loop":
        later = NOW + timedelta(minutes=5)
        while True:
            ops.project_pending(store, later, max_batches=1)
            rows = store.pending.due(TENANT, later, 20)
            for row in rows:
                ops.resume_run(store, TENANT, row.run_id, row.step_index, later, registry=reg)
            print(len(rows), flush=True)


if __name__ == "__main__":
    main()
