"""Operator actions (engine.operator_actions): the engine operation does the work, the
stream records who asked right before its events, and an action that did not happen
leaves nothing behind."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import on_event
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import operator_actions
from workflow_runner.engine.operator_actions import (
    Operator,
    cancel_as_operator,
    redrive_as_operator,
    resume_as_operator,
)
from workflow_runner.engine.redrive import RedriveRefused
from workflow_runner.errors import TransientStoreError
from workflow_runner.store import Store

from tests.support import TENANT_A, register, stream_types, trigger

OPS = Operator("tests (ada@host)", "because")


@pytest.fixture
def waiting(store: Store, registry: WorkflowRegistry, clock: ManualClock) -> str:
    register(
        registry,
        name="nap",
        trigger=on_event("nap.go"),
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"isSuccess": True})],
    )
    return str(trigger(store, registry, "nap.go", {}, clock.now()).started[0].run_id)


def _count(store: Store) -> int:
    return len(store.conn.execute("SELECT 1 FROM wf_events").fetchall())


def test_a_resume_that_is_not_due_records_nothing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, waiting: str
) -> None:
    before = _count(store)
    early = resume_as_operator(store, TENANT_A, waiting, clock.now(), OPS, registry)
    assert (early.happened, early.result.outcome, early.waiting_at) == (False, "not-due", 0)
    assert _count(store) == before
    wrong = resume_as_operator(store, TENANT_A, waiting, clock.now(), OPS, registry, 3, True)
    assert (wrong.happened, wrong.result.outcome, wrong.status_before) == (
        False,
        "already-resumed",
        "waiting",
    )
    assert _count(store) == before


def test_a_forced_resume_is_recorded_before_its_claim(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, waiting: str
) -> None:
    done = resume_as_operator(store, TENANT_A, waiting, clock.now(), OPS, registry, force=True)
    assert done.happened and done.result.outcome == "completed"
    events = store.streams.load(TENANT_A, waiting)
    assert [e.type for e in events][2:] == [
        "workflow.operator-action",
        "workflow.step.resumed",
        "workflow.run-completed",
    ]
    assert events[2].payload == {
        "action": "resume",
        "by": "tests (ada@host)",
        "reason": "because",
        "stepIndex": 0,
    }
    assert events[3].payload["resumedBy"] == "forced"
    summary = store.runs.get(TENANT_A, waiting)
    assert summary is not None and summary.version == 5 and summary.workflow_version == 1


def test_cancelling_a_settled_run_records_nothing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, waiting: str
) -> None:
    first = cancel_as_operator(store, TENANT_A, waiting, clock.now(), OPS)
    assert first.happened and first.result.outcome == "cancelled"
    types = stream_types(store, waiting)
    assert types[-2:] == ["workflow.operator-action", "workflow.run-cancelled"]
    again = cancel_as_operator(store, TENANT_A, waiting, clock.now() + timedelta(seconds=1), OPS)
    assert (again.happened, again.result.outcome) == (False, "already-cancelled")
    assert stream_types(store, waiting) == types


def test_a_refused_redrive_records_nothing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, waiting: str
) -> None:
    before = _count(store)
    with pytest.raises(RedriveRefused, match="only failed runs can be redriven"):
        redrive_as_operator(store, TENANT_A, waiting, clock.now(), OPS, registry)
    assert _count(store) == before


def _losing(monkeypatch: pytest.MonkeyPatch, times: int, lost_race: bool = True) -> list[int]:
    """cancel_run, as the operator's cancel calls it, fails `times` times as a deadlock
    victim (lost_race) or a lost connection would, after the audit fact was appended."""
    real, calls = operator_actions.cancel_run, []

    def losing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= times:
            raise TransientStoreError("database error (40P01): deadlock detected", lost_race)
        return real(*args, **kwargs)

    monkeypatch.setattr(operator_actions, "cancel_run", losing)
    return calls


def test_an_action_the_database_rolled_back_to_break_a_deadlock_runs_again(
    store: Store, clock: ManualClock, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _losing(monkeypatch, 2)
    action = cancel_as_operator(store, TENANT_A, waiting, clock.now(), OPS)
    assert action.happened and len(calls) == 3
    # the attempts rolled back left nothing: one audit fact, one cancel
    types = stream_types(store, waiting)
    assert types.count("workflow.operator-action") == 1
    assert types[-2:] == ["workflow.operator-action", "workflow.run-cancelled"]


def test_an_action_gives_up_on_other_transient_errors_and_inside_a_callers_transaction(
    store: Store, clock: ManualClock, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _count(store)
    calls = _losing(monkeypatch, 1, lost_race=False)  # the connection, say: not retried here
    with pytest.raises(TransientStoreError):
        cancel_as_operator(store, TENANT_A, waiting, clock.now(), OPS)
    assert len(calls) == 1 and _count(store) == before
    calls = _losing(monkeypatch, 1)
    # inside the caller's transaction the rollback took the caller's work too: its caller
    # decides (a savepoint would hold the locks that lost the race)
    with pytest.raises(TransientStoreError), store.transaction():
        cancel_as_operator(store, TENANT_A, waiting, clock.now(), OPS)
    assert len(calls) == 1 and _count(store) == before


def test_an_action_that_keeps_losing_races_stops_after_ten_attempts(
    store: Store, clock: ManualClock, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _losing(monkeypatch, 100)
    with pytest.raises(TransientStoreError):
        cancel_as_operator(store, TENANT_A, waiting, clock.now(), OPS)
    assert len(calls) == 10
    assert "workflow.operator-action" not in stream_types(store, waiting)
