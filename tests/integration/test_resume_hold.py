"""Timers to the second: the due scan sends requests to arrive up to RESUME_HOLD_SECONDS
early (SQS delays are whole seconds) and ResumeRun holds them until due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock, define_workflow, on_event, run_id_for
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.aws.ports import SqsResumeQueue
from workflow_runner.aws.runtime import build_aws_runtime
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import due_scan
from workflow_runner.engine.enqueue import delay_for
from workflow_runner.engine.resume import ResumeRequestItem
from workflow_runner.engine.resume_batch import Hold, ResumeBatchReport, resume_batch
from workflow_runner.settings import Settings
from workflow_runner.store import Store

from tests.support import TENANT_A, stream_types, trigger


class Nudges:
    def nudge_projection(self) -> None:
        pass

    def nudge_dispatcher(self) -> None:
        pass


def _define_sleeper(registry: WorkflowRegistry, name: str, key: Any) -> None:
    """A workflow that waits 10.4 s from its start, then completes."""
    registry.register(
        define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=key,
            steps=lambda s: [
                s.wait(for_=lambda ctx: timedelta(milliseconds=10_400)),
                s.return_({"ok": True}),
            ],
            register=False,
        )
    )


def _sleeper(registry: WorkflowRegistry) -> str:
    _define_sleeper(registry, "hold-sleep", "k")
    return run_id_for("hold-sleep", "k")


def _resume_holding(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    queue: InMemoryResumeQueue,
    requests: list[ResumeRequestItem],
) -> tuple[ResumeBatchReport, list[datetime]]:
    """resume_batch now with a 1 s hold whose waits move the clock to each instant;
    (the report, the instants waited for)."""
    waited: list[datetime] = []

    def wait_until(instant: datetime) -> datetime:
        waited.append(instant)
        clock.set(instant)
        return clock.now()

    report = resume_batch(
        store, queue, Nudges(), requests, clock.now(), registry, Hold(1.0, wait_until)
    )
    return report, waited


def test_delays_round_up_by_default_and_arrive_early_within_the_hold() -> None:
    now = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)
    assert delay_for(now + timedelta(seconds=10.4), now) == 11  # up to a second late
    assert delay_for(now + timedelta(seconds=10.4), now, early_seconds=1.0) == 10
    assert delay_for(now + timedelta(seconds=10.0), now, early_seconds=1.0) == 9
    assert delay_for(now + timedelta(seconds=0.4), now, early_seconds=1.0) == 0


def test_a_request_that_arrives_early_within_the_hold_is_resumed_at_its_instant(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _sleeper(registry)
    trigger(store, registry, "hold-sleep.go", {}, clock.now())
    due = clock.now() + timedelta(seconds=10.4)
    queue = InMemoryResumeQueue(clock)
    queue.early_seconds = 1.0  # type: ignore[attr-defined]
    due_scan(store, queue, clock.now(), horizon_seconds=60, registry=registry)
    [sent] = queue.sent
    assert sent.delay_seconds == 10  # visible 0.4 s before the run is due

    clock.advance(timedelta(seconds=10))
    report, waited = _resume_holding(
        store, registry, clock, queue, [ResumeRequestItem(TENANT_A, run_id, 0)]
    )

    assert waited == [due]
    assert [getattr(r, "outcome", r) for r in report.results] == ["completed"]
    assert report.requeued == 0 and report.lag_seconds == [0.0]
    assert stream_types(store, run_id)[-1] == "workflow.run-completed"


def test_each_held_request_of_a_batch_is_resumed_and_timed_at_its_own_instant(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    # The lag (ResumeLagSeconds) of the batch's first request was the time to its last
    # one's instant: the end of the holds, half a second after its pass had run.
    _define_sleeper(registry, "hold-pair", lambda e: e.payload["k"])
    start = clock.now()
    trigger(store, registry, "hold-pair.go", {"k": "a"}, start)
    clock.advance(timedelta(milliseconds=500))
    trigger(store, registry, "hold-pair.go", {"k": "b"}, clock.now())
    dues = [start + timedelta(milliseconds=10_400), start + timedelta(milliseconds=10_900)]
    clock.set(start + timedelta(seconds=10))

    report, waited = _resume_holding(
        store,
        registry,
        clock,
        InMemoryResumeQueue(clock),
        [ResumeRequestItem(TENANT_A, run_id_for("hold-pair", k), 0) for k in "ab"],
    )

    assert waited == dues
    assert [getattr(r, "outcome", r) for r in report.results] == ["completed", "completed"]
    assert report.lag_seconds == [0.0, 0.0]
    assert report.resumed_at == dues


def test_without_time_to_hold_or_beyond_the_hold_the_request_goes_back_to_the_queue(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    run_id = _sleeper(registry)
    trigger(store, registry, "hold-sleep.go", {}, clock.now())
    item = ResumeRequestItem(TENANT_A, run_id, 0)
    queue = InMemoryResumeQueue(clock)

    no_time = resume_batch(
        store,
        queue,
        Nudges(),
        [item],
        clock.now() + timedelta(seconds=10),
        registry,
        Hold(1.0, lambda instant: None),
    )
    too_early = resume_batch(
        store,
        queue,
        Nudges(),
        [item],
        clock.now() + timedelta(seconds=5),
        registry,
        Hold(1.0, lambda instant: (_ for _ in ()).throw(AssertionError("held 5.4 s early"))),
    )

    assert [r.outcome for r in no_time.results + too_early.results] == ["not-due", "not-due"]  # type: ignore[union-attr]
    assert no_time.requeued == 1 and too_early.requeued == 1
    assert stream_types(store, run_id)[-1] == "workflow.step.waiting"


def test_resume_run_s_queue_is_told_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own region: it passed only after a test that left AWS_DEFAULT_REGION set.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    settings = Settings(database_url="postgresql:///x", resume_queue_url="https://sqs/q")
    assert settings.resume_hold_seconds == 1.0
    runtime = build_aws_runtime(settings)
    assert isinstance(runtime.resume_queue, SqsResumeQueue)
    assert runtime.resume_queue.early_seconds == 1.0
    off = build_aws_runtime(settings.model_copy(update={"resume_hold_seconds": 0.0}))
    assert off.resume_queue.early_seconds == 0.0  # type: ignore[attr-defined]
