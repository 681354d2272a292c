"""Counterparts of the seeds' resume-loop integration test (seeds/001) on real PostgreSQL."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from workflow_runner import ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine import resume as resume_module
from workflow_runner.errors import RunNotFound
from workflow_runner.store import NewEvent, Store, connect
from workflow_runner.store.queries import query
from workflow_runner.store.sql import Sql, _Queued
from workflow_runner.store.streams import StreamStore

from tests.support import (
    TENANT_A,
    event,
    pending_rows,
    resume_due,
    stream,
    stream_types,
    trigger,
)


@pytest.fixture
def wait_wf(registry: WorkflowRegistry):  # type: ignore[no-untyped-def]
    wf = define_workflow(
        name="rl-wait",
        trigger=on_event("rl-test.wait"),
        idempotency_key=lambda e: e.payload["runKey"],
        steps=lambda s: [
            s.wait(for_=lambda ctx: ctx.event.payload["forIso"]),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    registry.register(wf)
    return wf


@pytest.fixture
def retry_wf(registry: WorkflowRegistry):  # type: ignore[no-untyped-def]
    def gate(ctx):  # type: ignore[no-untyped-def]
        if ctx.workflow.retry_attempt == 1:
            raise RuntimeError("first-attempt-fails")
        return ctx.workflow.retry_attempt

    wf = define_workflow(
        name="rl-retry",
        trigger=on_event("rl-test.retry"),
        idempotency_key=lambda e: e.payload["runKey"],
        steps=lambda s: [
            s.retry(times=2, backoff="linear", do=[s.compute("gate", gate)]),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    registry.register(wf)
    return wf


def test_due_wait_resumes_to_completion_and_its_pending_row_is_deleted(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    past = (clock.now() - timedelta(hours=1)).isoformat()
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": past}, clock.now())
    assert [r.run_id for r in pending_rows(store)] == [run_id]

    resume_due(store, registry, clock.now())

    assert stream_types(store, run_id) == [
        ev.RUN_STARTED,
        ev.STEP_WAITING,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]
    completed = stream(store, run_id)[3].payload
    assert completed["workflowName"] == "rl-wait" and completed["stepIndex"] == 2
    assert pending_rows(store) == []


def test_not_yet_due_wait_leaves_the_row_and_run_untouched(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    future = (clock.now() + timedelta(hours=1)).isoformat()
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": future}, clock.now())

    assert resume_due(store, registry, clock.now()) == []
    direct = ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), registry=registry)

    assert direct.outcome == "not-due"
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert len(pending_rows(store)) == 1


def test_changed_definition_fails_loud_with_workflow_definition_changed(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    past = (clock.now() - timedelta(hours=1)).isoformat()
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": past}, clock.now())
    changed = define_workflow(
        name="rl-wait",
        trigger=on_event("rl-test.wait"),
        # A step before the wait: the run would resume at another place.
        steps=lambda s: [s.compute("new", lambda c: 1), s.wait(for_="PT1M")],
        register=False,
    )
    registry.unregister("rl-wait")
    registry.register(changed)

    results = resume_due(store, registry, clock.now())

    assert [r.outcome for r in results] == ["failed"]
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING, ev.RUN_FAILED]
    failed = stream(store, run_id)[2].payload
    assert failed["reason"] == "workflow_definition_changed"
    assert failed["stepIndex"] == 0 and failed["workflowName"] == "rl-wait"
    assert "definition changed" in failed["error"]
    assert pending_rows(store) == []


def test_unregistered_workflow_fails_loud_naming_workflow_and_run(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    registry.unregister("rl-wait")

    result = ops.resume_run(
        store, TENANT_A, run_id, 0, clock.now() + timedelta(minutes=2), registry=registry
    )

    assert result.outcome == "failed" and result.reason == "workflow_definition_changed"
    error = stream(store, run_id)[-1].payload["error"]
    assert '"rl-wait" is not registered' in error and run_id in error


def test_retry_resumes_at_the_same_step_with_the_attempt_threaded(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, retry_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(retry_wf.name, key)
    trigger(store, registry, "rl-test.retry", {"runKey": key}, clock.now())

    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.RETRY_SCHEDULED]
    scheduled = stream(store, run_id)[1].payload
    assert scheduled["stepIndex"] == 0 and scheduled["attempt"] == 1
    assert pending_rows(store)[0].retry_attempt == 1

    resume_due(store, registry, clock.now() + timedelta(seconds=10))

    types = stream_types(store, run_id)
    assert types == [ev.RUN_STARTED, ev.RETRY_SCHEDULED, ev.STEP_RESUMED, ev.RUN_COMPLETED]
    assert types.count(ev.RETRY_SCHEDULED) == 1


def test_resuming_a_settled_run_appends_nothing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    later = clock.now() + timedelta(minutes=5)
    assert (
        ops.resume_run(store, TENANT_A, run_id, 0, later, registry=registry).outcome == "completed"
    )
    registry.unregister("rl-wait")  # even a vanished definition must not add run-failed

    again = ops.resume_run(store, TENANT_A, run_id, 0, later, registry=registry)

    assert again.outcome == "already-resumed"
    assert stream_types(store, run_id)[-1] == ev.RUN_COMPLETED


def test_force_resumes_a_wait_before_its_time(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    key = str(uuid.uuid4())
    run_id = run_id_for(wait_wf.name, key)
    trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "P30D"}, clock.now())

    result = ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), force=True, registry=registry)

    assert result.outcome == "completed"
    assert stream(store, run_id)[2].payload["resumedBy"] == "forced"


def test_resume_runs_batches_passes_in_one_transaction_and_isolates_failures(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    keys = ["a", "b"]
    for key in keys:
        trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    later = clock.now() + timedelta(minutes=1)
    items = [
        ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", "a"), 0),
        ops.ResumeRequestItem(TENANT_A, str(uuid.uuid4()), 0),  # no such run
        ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", "b"), 0),
    ]

    results = ops.resume_runs(store, items, later, registry)

    assert isinstance(results[1], RunNotFound)
    assert [getattr(r, "outcome", None) for r in results] == ["completed", None, "completed"]
    for key in keys:
        assert stream_types(store, run_id_for("rl-wait", key))[-1] == ev.RUN_COMPLETED


def test_a_run_twice_in_one_batch_is_resumed_once_though_both_were_read_together(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    """A batch reads its runs in one round trip before any pass; a duplicate delivery
    in the same batch claims at the version read, loses to the first pass's claim."""
    trigger(store, registry, "rl-test.wait", {"runKey": "dup", "forIso": "PT1M"}, clock.now())
    run_id = run_id_for("rl-wait", "dup")
    item = ops.ResumeRequestItem(TENANT_A, run_id, 0)

    results = ops.resume_runs(store, [item, item], clock.now() + timedelta(minutes=1), registry)

    assert [getattr(r, "outcome", None) for r in results] == ["completed", "already-resumed"]
    assert stream_types(store, run_id) == [
        ev.RUN_STARTED,
        ev.STEP_WAITING,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]


def test_projection_reports_new_suspensions_due_within_the_horizon(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    ops.ingest_domain_event(
        store, event("rl-test.wait", {"runKey": "soon", "forIso": "PT20S"}), clock.now(), registry
    )
    ops.ingest_domain_event(
        store, event("rl-test.wait", {"runKey": "late", "forIso": "PT2M"}), clock.now(), registry
    )

    result = ops.project_pending(store, clock.now(), horizon_seconds=60)

    assert [(d.run_id, d.step_index, d.wake_at) for d in result.due_soon] == [
        (run_id_for("rl-wait", "soon"), 0, clock.now() + timedelta(seconds=20))
    ]
    assert ops.project_pending(store, clock.now(), horizon_seconds=60).due_soon == []


def test_projection_drops_a_resumed_row_by_the_event_type_alone(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    """The projection reads the payload only of the events it acts on: a resume (or a
    run's end) drops the row by its type, so a payload it cannot decode does not stop it,
    and a backlog of resumes costs no decoding."""
    ops.ingest_domain_event(
        store, event("rl-test.wait", {"runKey": "bare", "forIso": "PT1M"}), clock.now(), registry
    )
    run_id = run_id_for("rl-wait", "bare")
    ops.project_pending(store, clock.now())
    rows = "SELECT count(*) AS n FROM workflow_run_pending WHERE run_id = %(r)s"
    assert store.conn.execute(rows, {"r": run_id}).fetchone() == {"n": 1}
    version = len(store.streams.load(TENANT_A, run_id))
    assert store.streams.append(
        TENANT_A, run_id, "workflow-run", version, [NewEvent(ev.STEP_RESUMED, {})], clock.now()
    )

    assert ops.project_pending(store, clock.now()).applied == 1
    assert store.conn.execute(rows, {"r": run_id}).fetchone() == {"n": 0}


def test_a_pass_that_breaks_mid_batch_costs_only_itself(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    wait_wf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("a", "bad", "b"):
        trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    bad = run_id_for("rl-wait", "bad")
    real = resume_module.continue_run

    def breaking(store_, run, *args, **kwargs):  # type: ignore[no-untyped-def]
        if run.state.run_id == bad:
            raise RuntimeError("bug in a pass, after its claim was appended")
        return real(store_, run, *args, **kwargs)

    monkeypatch.setattr(resume_module, "continue_run", breaking)
    items = [
        ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", k), 0) for k in ("a", "bad", "b")
    ]

    results = ops.resume_runs(store, items, clock.now() + timedelta(minutes=1), registry)

    assert isinstance(results[1], RuntimeError)
    assert [getattr(r, "outcome", None) for r in results] == ["completed", None, "completed"]
    assert stream_types(store, bad) == [ev.RUN_STARTED, ev.STEP_WAITING]  # its claim rolled back


def test_a_batch_of_timers_writes_its_claims_with_its_passes_in_one_statement(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    wait_wf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = ["a", "b", "c"]
    for key in keys:
        trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    calls: dict[str, list[int]] = {"claims": [], "passes": []}
    real_claims, real_passes = StreamStore.append_to_many, StreamStore.record_passes

    def claims(self: StreamStore, tenant_id: str, stream_type: str, appends: Any, *a: Any) -> Any:
        calls["claims"].append(len(appends))
        return real_claims(self, tenant_id, stream_type, appends, *a)

    def passes(self: StreamStore, writes: Any, *a: Any) -> Any:
        calls["passes"].append(len(writes))
        return real_passes(self, writes, *a)

    monkeypatch.setattr(StreamStore, "append_to_many", claims)
    monkeypatch.setattr(StreamStore, "record_passes", passes)
    items = [ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", k), 0) for k in keys]

    results = ops.resume_runs(store, items, clock.now() + timedelta(minutes=1), registry)

    assert [getattr(r, "outcome", None) for r in results] == ["completed"] * 3
    # The timers' passes need nothing more than the batch read: they run first, and
    # each claim goes out first among its run's events in the passes' one statement.
    assert calls == {"claims": [], "passes": [3]}
    for key in keys:
        run_id = run_id_for("rl-wait", key)
        assert stream_types(store, run_id)[2:] == [ev.STEP_RESUMED, ev.RUN_COMPLETED]
        [summary] = [r for r in store.runs.for_tenant(TENANT_A) if r.run_id == run_id]
        assert (summary.status, summary.version) == ("completed", 4)


def test_a_run_id_in_capitals_is_resumed_like_its_lower_case_spelling(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, wait_wf
) -> None:
    """The claim's answer names runs as the database spells uuids."""
    trigger(store, registry, "rl-test.wait", {"runKey": "caps", "forIso": "PT1M"}, clock.now())
    run_id = run_id_for("rl-wait", "caps")
    item = ops.ResumeRequestItem(TENANT_A, run_id.upper(), 0)

    [result] = ops.resume_runs(store, [item], clock.now() + timedelta(minutes=1), registry)

    assert getattr(result, "outcome", result) == "completed"
    assert stream_types(store, run_id)[-1] == ev.RUN_COMPLETED


def _resume_concurrently_after_the_read(
    monkeypatch: pytest.MonkeyPatch, other: Store, registry: WorkflowRegistry, run_id: str, at: Any
) -> list[Any]:
    """Once the batch has read its runs (the first time only), another worker resumes
    `run_id` and commits: the batch's claim on it is then stale."""
    real = resume_module.load_runs_for_resume
    raced: list[bool] = []
    done: list[Any] = []

    def read_then_race(store_: Store, runs: Any) -> Any:
        loaded = real(store_, runs)
        if not raced:  # the other worker's resume reads through here too
            raced.append(True)
            done.append(ops.resume_run(other, TENANT_A, run_id, 0, at, registry=registry))
        return loaded

    monkeypatch.setattr(resume_module, "load_runs_for_resume", read_then_race)
    return done


def _assert_ran_again_claiming_first(caplog: pytest.LogCaptureFixture) -> None:
    """The batch was rolled back and ran again claiming first, in one transaction (not
    resumed one by one, which a failed batch falls back to)."""
    messages = [r.getMessage() for r in caplog.records]
    assert "resume batch runs again, claiming first" in messages
    assert "resume batch failed, resuming one by one" not in messages


def test_a_timer_batch_whose_claim_lost_runs_again_claiming_first(
    store: Store,
    db_url: str,
    registry: WorkflowRegistry,
    clock: ManualClock,
    wait_wf,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="workflow_runner")
    keys = ["a", "b", "c"]
    for key in keys:
        trigger(store, registry, "rl-test.wait", {"runKey": key, "forIso": "PT1M"}, clock.now())
    raced = run_id_for("rl-wait", "b")
    at = clock.now() + timedelta(minutes=1)
    other = connect(db_url)
    try:
        done = _resume_concurrently_after_the_read(monkeypatch, other, registry, raced, at)
        items = [ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", k), 0) for k in keys]

        results = ops.resume_runs(store, items, at, registry)
    finally:
        other.close()

    assert [d.outcome for d in done] == ["completed"]
    assert [getattr(r, "outcome", None) for r in results] == [
        "completed",
        "already-resumed",
        "completed",
    ]
    # The passes' statement met b's claim taken: the whole batch ran again claiming
    # first (one transaction), not one by one.
    _assert_ran_again_claiming_first(caplog)
    for key in keys:  # each claimed and written once, versions and positions in step
        events = stream(store, run_id_for("rl-wait", key))
        assert [e.type for e in events] == [
            ev.RUN_STARTED,
            ev.STEP_WAITING,
            ev.STEP_RESUMED,
            ev.RUN_COMPLETED,
        ]
        assert [e.version for e in events] == [1, 2, 3, 4]
        assert [e.position for e in events] == sorted(e.position for e in events)


@pytest.fixture
def mail_after_wait_wf(registry: WorkflowRegistry):  # type: ignore[no-untyped-def]
    wf = define_workflow(
        name="rl-mail",
        trigger=on_event("rl-test.mail"),
        idempotency_key=lambda e: e.payload["runKey"],
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.mail_send(to="ops@example.com", subject="done", body="the wait is over"),
        ],
        register=False,
    )
    registry.register(wf)
    return wf


class _SendOrder(Sql):
    """Records the names of the statements as they go out, in order."""

    NAMES: ClassVar[dict[str, str]] = {
        query(n): n for n in ("append_to_many", "insert_outbox", "record_pass")
    }

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.order: list[str] = []

    def all(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        if not self._queue:
            self.order.append(name)
        return super().all(name, params)

    def _send(self, statements: Sequence[_Queued]) -> None:
        self.order += [self.NAMES.get(s.sql, "other") for s in statements]
        super()._send(statements)


def test_a_timer_batch_that_also_dispatches_sends_its_claims_ahead_of_its_other_writes(
    db_url: str,
    registry: WorkflowRegistry,
    clock: ManualClock,
    mail_after_wait_wf,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="workflow_runner")
    store = connect(db_url, sql_type=_SendOrder)
    other = connect(db_url)
    try:
        for key in ("a", "b"):
            trigger(store, registry, "rl-test.mail", {"runKey": key}, clock.now())
        at = clock.now() + timedelta(minutes=1)
        items = [ops.ResumeRequestItem(TENANT_A, run_id_for("rl-mail", k), 0) for k in "ab"]
        sql = store._sql
        assert isinstance(sql, _SendOrder)
        real_pass = resume_module._continue_claimed

        def traced_pass(*args: Any) -> Any:
            sql.order.append("pass")
            return real_pass(*args)

        monkeypatch.setattr(resume_module, "_continue_claimed", traced_pass)
        sql.order.clear()

        first = ops.resume_runs(store, items[:1], at, registry)

        # The pass ran first and held its dispatch back; its claim went out ahead of it.
        assert [getattr(r, "outcome", None) for r in first] == ["completed"]
        assert [n for n in sql.order if n != "other"] == [
            "load_run_tail",
            "pass",
            "append_to_many",
            "insert_outbox",
            "record_pass",
        ], sql.order

        done = _resume_concurrently_after_the_read(
            monkeypatch, other, registry, run_id_for("rl-mail", "b"), at
        )
        again = ops.resume_runs(store, items, at, registry)
    finally:
        other.close()

    # Run b was resumed by another worker after the batch read it: the claim sent ahead
    # lost, the batch ran again claiming first, and b answered already-resumed.
    assert [d.outcome for d in done] == ["completed"]
    assert [getattr(r, "outcome", None) for r in again] == ["already-resumed"] * 2
    _assert_ran_again_claiming_first(caplog)
    for key in "ab":
        events = stream(store, run_id_for("rl-mail", key))
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        assert [e.type for e in events].count(ev.STEP_RESUMED) == 1
    mails = store.conn.execute("SELECT count(*) AS n FROM dispatch_outbox").fetchone()
    store.close()
    assert mails is not None and mails["n"] == 2  # one per run, none twice


def test_a_timer_batch_whose_pass_must_write_at_once_runs_again_claiming_first(
    store: Store,
    registry: WorkflowRegistry,
    clock: ManualClock,
    wait_wf,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pass that reaches the database before its claim is written (here: its trigger
    event is gone, and the run's failure is written at once) must not be committed
    with its claim after it: the batch runs again claiming first."""
    caplog.set_level(logging.DEBUG, logger="workflow_runner")
    for key in ("a", "gone"):
        trigger(
            store,
            registry,
            "rl-test.wait",
            {"runKey": key, "forIso": "PT1M"},
            clock.now(),
            event_id=f"trigger-{key}",
        )
    store.conn.execute("DELETE FROM inbox WHERE event_id = 'trigger-gone'")
    items = [ops.ResumeRequestItem(TENANT_A, run_id_for("rl-wait", k), 0) for k in ("a", "gone")]

    results = ops.resume_runs(store, items, clock.now() + timedelta(minutes=1), registry)

    assert [getattr(r, "outcome", None) for r in results] == ["completed", "failed"]
    _assert_ran_again_claiming_first(caplog)
    gone = stream(store, run_id_for("rl-wait", "gone"))
    assert [e.type for e in gone] == [
        ev.RUN_STARTED,
        ev.STEP_WAITING,
        ev.STEP_RESUMED,
        ev.RUN_FAILED,
    ]
    assert gone[-1].payload["reason"] == "trigger_event_unavailable"
    assert [e.version for e in gone] == [1, 2, 3, 4]
