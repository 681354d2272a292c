"""wait_for_condition at the engine level on real PostgreSQL, the deployed way: the
pending projection writes the checkpoint's row, the due scan hands it to the resume
queue, a ResumeRun batch claims it and runs the next check. A pass is atomic: a crash
between a check and its checkpoint repeats only that check, from the checkpoint before;
a duplicate request never runs a check early; a redrive repeats the failed check with
its recorded state; erasing the trigger event blanks the recorded states."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import (
    Continue,
    Done,
    Event,
    ManualClock,
    define_workflow,
    on_event,
    run_id_for,
)
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import due_scan, project_pending, resume_run, resume_runs
from workflow_runner.engine.erase import erase_event
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.engine.resume import ResumeRequestItem
from workflow_runner.store import Store
from workflow_runner.stream import StepWaitingForCondition

from tests.support import TENANT_A, pending_rows, stream, stream_types, trigger

CONDITION = "workflow.condition.waiting"


class Checks:
    """The check of the workflow below: Done at the third check; records each state it
    saw, and raises when told to."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.fail_on: int | None = None

    def __call__(self, ctx: Any, state: Any) -> Any:
        self.seen.append(state)
        if state["n"] == self.fail_on:
            raise RuntimeError("status endpoint failed")
        if state["n"] == 2:
            return Done({"job": state["job"], "polls": 3})
        return Continue({**state, "n": state["n"] + 1})


@pytest.fixture
def checks(registry: WorkflowRegistry) -> Checks:
    check = Checks()
    registry.register(
        define_workflow(
            name="poll-export",
            trigger=on_event("export.requested"),
            idempotency_key=Event.payload["exportId"],
            register=False,
            steps=lambda s: [
                s.wait_for_condition(
                    "export",
                    check,
                    initial={"n": 0, "job": Event.payload["exportId"]},
                    every="PT1M",
                ),
                s.return_(lambda ctx: ctx.steps["export"]),
            ],
        )
    )
    return check


RUN = run_id_for("poll-export", "x-1")


def _start(store: Store, registry: WorkflowRegistry, clock: ManualClock) -> str:
    result = trigger(store, registry, "export.requested", {"exportId": "x-1"}, clock.now())
    return result.event_id


def _checkpoints(store: Store) -> list[StepWaitingForCondition]:
    return [e.fact for e in stream(store, RUN) if isinstance(e.fact, StepWaitingForCondition)]


def test_checks_come_due_through_the_due_scan_and_a_resume_batch(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, checks: Checks
) -> None:
    _start(store, registry, clock)
    [row] = pending_rows(store)
    assert (row.suspension_event_type, row.wake_at) == (
        CONDITION,
        clock.now() + timedelta(minutes=1),
    )
    queue = InMemoryResumeQueue(clock)
    for _ in range(2):
        clock.advance(timedelta(minutes=1))
        due_scan(store, queue, clock.now(), horizon_seconds=0, registry=registry)
        requests = queue.receive()
        assert [r.run_id for r in requests] == [RUN]
        items = [ResumeRequestItem(r.tenant_id, r.run_id, r.step_index) for r in requests]
        # The same request twice in one batch: one claim, one check.
        results = resume_runs(store, items + items, clock.now(), registry=registry)
        assert [getattr(r, "outcome", r) for r in results][1] == "already-resumed"
        project_pending(store, clock.now())
    assert stream_types(store, RUN)[-1] == "workflow.run-completed"
    assert [c["n"] for c in checks.seen] == [0, 1, 2]
    assert [(c.attempts, c.condition_state["n"]) for c in _checkpoints(store)] == [(1, 1), (2, 2)]
    assert pending_rows(store) == []


def test_a_duplicate_request_does_not_run_a_check_before_its_time(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, checks: Checks
) -> None:
    _start(store, registry, clock)
    clock.advance(timedelta(minutes=1))
    first = resume_run(store, TENANT_A, RUN, 0, clock.now(), registry=registry)
    assert first.outcome == "suspended"
    # A stale copy of the same request: the run waits at the same step again, not due.
    again = resume_run(store, TENANT_A, RUN, 0, clock.now(), registry=registry)
    assert (again.outcome, again.wake_at) == ("not-due", clock.now() + timedelta(minutes=1))
    assert [c["n"] for c in checks.seen] == [0, 1]


def test_a_crash_between_a_check_and_its_checkpoint_repeats_only_that_check(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    checks: Checks,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _start(store, registry, clock)
    clock.advance(timedelta(minutes=1))

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the function died before its commit")

    # The last thing a pass does after its writes went out, inside its transaction.
    monkeypatch.setattr("workflow_runner.engine.persist.close_joins", crash)
    with pytest.raises(RuntimeError):
        resume_run(store, TENANT_A, RUN, 0, clock.now(), registry=registry)
    assert [(c.attempts, c.condition_state["n"]) for c in _checkpoints(store)] == [(1, 1)]
    monkeypatch.undo()

    retried = resume_run(store, TENANT_A, RUN, 0, clock.now(), registry=registry)
    assert retried.outcome == "suspended"
    # Check 1 ran once; check 2 ran twice (the crashed pass, then its retry), both times
    # with the state of the checkpoint before it.
    assert [c["n"] for c in checks.seen] == [0, 1, 1]
    assert [(c.attempts, c.condition_state["n"]) for c in _checkpoints(store)] == [
        (1, 1),
        (2, 2),
    ]


def test_a_redrive_repeats_the_failed_check_with_its_recorded_state(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, checks: Checks
) -> None:
    _start(store, registry, clock)
    checks.fail_on = 1
    clock.advance(timedelta(minutes=1))
    failed = resume_run(store, TENANT_A, RUN, 0, clock.now(), registry=registry)
    assert (failed.outcome, failed.reason) == ("failed", "condition_check_failed")
    checks.fail_on = None
    redrive_run(store, TENANT_A, RUN, clock.now(), registry=registry)
    assert [c["n"] for c in checks.seen] == [0, 1, 1]
    assert _checkpoints(store)[-1].attempts == 2


def test_erasing_the_trigger_event_blanks_the_recorded_states(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, checks: Checks
) -> None:
    event_id = _start(store, registry, clock)
    assert _checkpoints(store)[0].condition_state == {"n": 1, "job": "x-1"}
    erase_event(store, TENANT_A, event_id, clock.now())
    [checkpoint] = _checkpoints(store)
    assert (checkpoint.condition_state, checkpoint.redacted) == (None, True)
