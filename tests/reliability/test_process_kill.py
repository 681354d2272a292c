"""A real process kill (SIGKILL) in the middle of a pass's transaction, and at random
moments of a busy resume worker: the database rolls the open pass back, the normal
ticks finish the work, each suspension is resumed once and each dispatch requested once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition.dsl import DomainEvent
from workflow_runner.store import Store

from tests.reliability import killable
from tests.reliability.harness import ROOT, check_invariants, record


def _child(mode: str, db_url: str, kill_in_pass: bool) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "WFR_KILL_IN_PASS": "1" if kill_in_pass else "0",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.killable", mode, db_url],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_pass_killed_mid_transaction_leaves_nothing_and_is_redone(
    db_url: str, store: Store
) -> None:
    child = _child("ingest", db_url, kill_in_pass=True)
    assert child.wait(60) == -signal.SIGKILL
    count = store.conn.execute(
        "SELECT (SELECT count(*) FROM wf_events) + (SELECT count(*) "
        "FROM inbox) + (SELECT count(*) FROM dispatch_outbox) AS n"
    )
    assert count.fetchone() == {"n": 0}, "the killed pass must have left nothing behind"
    # EventBridge retries the invocation; this time the pass runs through.
    os.environ.pop("WFR_KILL_IN_PASS", None)
    event = DomainEvent("kill-0", "kill.me", {"n": 0}, killable.TENANT, source="t")
    result = ops.ingest_domain_event(store, event, killable.NOW, killable.registry())
    assert result.started[0].outcome == "suspended"
    record(process_kills=1)


@pytest.mark.parametrize("kills", [3])
def test_a_resume_worker_killed_at_random_moments_loses_nothing(
    db_url: str, store: Store, kills: int
) -> None:
    _killed_worker(db_url, store, runs=120, kills=kills)


@pytest.mark.soak
def test_many_kills_of_a_busy_resume_worker(db_url: str, store: Store) -> None:
    _killed_worker(db_url, store, runs=1000, kills=25)


def _killed_worker(db_url: str, store: Store, runs: int, kills: int) -> None:
    reg = killable.registry()
    for n in range(runs):
        event = DomainEvent(f"kill-{n}", "kill.me", {"n": n}, killable.TENANT, source="t")
        ops.ingest_domain_event(store, event, killable.NOW, reg)
    rng = random.Random(3)
    for _ in range(kills):
        child = _child("resume-loop", db_url, kill_in_pass=False)
        assert child.stdout is not None
        child.stdout.readline()  # it is up and working
        time.sleep(rng.uniform(0.0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    later = killable.NOW + timedelta(minutes=5)
    for _ in range(100):  # the normal ticks
        ops.project_pending(store, later)
        rows = store.pending.due(killable.TENANT, later, 1000)
        if not rows:
            break
        for row in rows:
            ops.resume_run(store, killable.TENANT, row.run_id, row.step_index, later, registry=reg)
    ops.project_pending(store, later)
    assert check_invariants(store, reg) == []
    statuses = store.conn.execute(
        "SELECT status, count(*) AS n FROM workflow_runs GROUP BY status"
    ).fetchall()
    assert {r["status"]: r["n"] for r in statuses} == {"completed": runs}
    requested = store.conn.execute(
        "SELECT count(*) AS n FROM wf_events WHERE type = %s", (ev.DISPATCH_REQUESTED,)
    ).fetchone()
    assert requested == {"n": runs}
    record(process_kills=kills, runs_driven=runs)
