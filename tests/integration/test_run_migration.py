"""Migrating waiting runs (issue 32 item 3) on real PostgreSQL: a run moves onto another
registered definition where the step it waits at exists with the same kind, recorded on
its stream as an operator action; what it received survives the move, the rows that
name its step follow it, and it then resumes and completes on the new definition."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from workflow_runner import Event, Steps, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner.clock import ManualClock
from workflow_runner.definition import WorkflowDefinition, WorkflowRegistry
from workflow_runner.engine.callbacks import complete_callback
from workflow_runner.engine.operator_actions import Operator
from workflow_runner.engine.pinning import pinned_definitions
from workflow_runner.engine.redrive import redrive_run
from workflow_runner.engine.run_migration import (
    MigrationReport,
    MigrationRequest,
    migrate_runs,
)
from workflow_runner.engine.step_mapping import parse_mapping
from workflow_runner.engine.tasks import TaskPorts, run_task
from workflow_runner.errors import InvalidInput
from workflow_runner.store import Store
from workflow_runner.stream import RunMigrated
from workflow_runner.timeline import describe_event

from tests.support import TENANT_A, TENANT_B, event, resume_open, stream_types

OPS = Operator("tests (ada@host)", "step inserted before the wait")
BROKEN = {"after": False}


def order(version: int, steps: Callable[[Any], list[Any]]) -> WorkflowDefinition:
    return define_workflow(
        name="order",
        version=version,
        trigger=on_event("order.placed"),
        idempotency_key=Event.payload["id"],
        awaits={"paid": "order.paid", "shipped": "order.shipped"},
        steps=steps,
        register=False,
    )


def _after(ctx: Any) -> str:
    if BROKEN["after"]:
        raise RuntimeError("a bug, fixed before the redrive")
    return "ok"


V1 = order(
    1,
    lambda s: [
        s.wait_for_event("paid", timeout="P7D", result_key="payment"),
        s.return_({"isSuccess": True, "v": 1, "payment": Steps["payment"]}),
    ],
)
V2 = order(
    2,
    lambda s: [
        s.compute("plan", lambda ctx: "pro"),
        s.wait_for_event("paid", timeout="P7D", result_key="payment"),
        s.compute("after", _after),
        s.return_({"isSuccess": True, "v": 2, "payment": Steps["payment"]}),
    ],
)


def registry_of(*definitions: WorkflowDefinition) -> WorkflowRegistry:
    registry = WorkflowRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


def start(
    store: Store, definition: WorkflowDefinition, now: datetime, key: str, tenant: str = TENANT_A
) -> str:
    registry = registry_of(definition)
    ops.ingest_domain_event(store, event("order.placed", {"id": key}, tenant), now, registry)
    ops.project_pending(store, now)
    return run_id_for(definition.name, key)


def migrate(
    store: Store,
    registry: WorkflowRegistry,
    now: datetime,
    *mapping: str,
    dry_run: bool = False,
    tenant: str | None = None,
    to_version: int = 2,
) -> MigrationReport:
    request = MigrationRequest("order", to_version, tenant, parse_mapping(mapping), dry_run=dry_run)
    report = migrate_runs(store, registry, request, now, OPS)
    ops.project_pending(store, now)
    return report


def pay(store: Store, now: datetime, key: str, tenant: str = TENANT_A) -> None:
    ops.wake_on_event(store, event("order.paid", {"id": key, "amount": 9}, tenant), now)
    ops.project_pending(store, now)


def result_of(store: Store, run_id: str) -> Any:
    events = store.streams.load(TENANT_A, run_id)
    assert events[-1].type == "workflow.run-completed", [e.type for e in events]
    return events[-1].payload["result"]


def pending(store: Store, run_id: str) -> Any:
    row = store.conn.execute(
        "SELECT step_index, definition_fingerprint, suspension_version, match_after_version,"
        " awaited_event_id FROM workflow_run_pending WHERE run_id = %s",
        (run_id,),
    ).fetchone()
    return row


# --- moves ------------------------------------------------------------------------------


def test_a_run_whose_wait_moved_down_is_migrated_and_completes_on_the_new_version(
    store: Store, clock: ManualClock
) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    suspended = store.streams.load(TENANT_A, run_id)[-1].version
    v2 = registry_of(V2)  # v1 is gone from the code
    report = migrate(store, v2, clock.now(), "0=1")
    [move] = report.moves
    assert (move.outcome, move.from_path, move.to_path) == ("moved", [{"i": 0}], [{"i": 1}])
    assert move.from_version == 1 and report.complete
    events = store.streams.load(TENANT_A, run_id)
    assert [e.type for e in events[-2:]] == ["workflow.operator-action", "workflow.run-migrated"]
    assert events[-2].payload == {
        "action": "migrate",
        "by": "tests (ada@host)",
        "reason": "step inserted before the wait",
        "stepIndex": 0,
    }
    assert events[-1].payload == {
        "suspensionVersion": suspended,
        "fromFingerprint": V1.fingerprint,
        "toFingerprint": V2.fingerprint,
        "toVersion": 2,
        "fromStepIndex": 0,
        "toStepIndex": 1,
        "fromPath": [{"i": 0}],
        "toPath": [{"i": 1}],
    }
    assert describe_event(events[-1]) == (
        f"moved from step 0 to step 1 of v2 (definition {V2.fingerprint[:12]}…)"
    )
    row = pending(store, run_id)
    assert (row["step_index"], row["definition_fingerprint"]) == (1, V2.fingerprint)
    assert (row["suspension_version"], row["match_after_version"]) == (suspended, suspended + 2)
    summary = store.runs.get(TENANT_A, run_id)
    assert summary is not None
    assert (summary.workflow_version, summary.definition_fingerprint) == (2, V2.fingerprint)
    assert summary.version == suspended and summary.status == "waiting"  # the tail starts there

    pay(store, clock.now(), "o-1")  # the wakeup appends after the migration's events
    resume_open(store, v2, run_id, clock.now())
    assert result_of(store, run_id) == {
        "isSuccess": True,
        "v": 2,
        "payment": {"id": "o-1", "amount": 9},
    }
    resumed = [e for e in store.streams.load(TENANT_A, run_id) if e.type == "workflow.step.resumed"]
    assert [e.payload["path"] for e in resumed] == [[{"i": 1}]]


def test_without_the_migration_the_same_run_fails_loud(store: Store, clock: ManualClock) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    pay(store, clock.now(), "o-1")
    resume_open(store, registry_of(V2), run_id, clock.now())
    assert ops.load_run(store, TENANT_A, run_id).last_failure is not None
    assert stream_types(store, run_id)[-1] == "workflow.run-failed"


def test_an_event_matched_before_the_migration_is_kept_and_read_after_it(
    store: Store, clock: ManualClock
) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    pay(store, clock.now(), "o-1")  # matched, not resumed yet
    v2 = registry_of(V2)
    assert migrate(store, v2, clock.now(), "0=1").complete
    assert pending(store, run_id)["awaited_event_id"] is not None  # still due
    # A resume request sent before the move names the old step: it is for this very
    # suspension and resumes it where it waits now.
    result = ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), registry=v2)
    assert result.outcome == "completed"
    assert result_of(store, run_id)["payment"] == {"id": "o-1", "amount": 9}
    assert ops.resume_run(store, TENANT_A, run_id, 3, clock.now(), registry=v2).outcome == (
        "already-resumed"
    )


def test_an_event_whose_wakeup_lost_to_the_migration_is_taken_by_the_projection(
    store: Store, clock: ManualClock
) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    v2 = registry_of(V2)
    request = MigrationRequest("order", 2, mapping=parse_mapping(["0=1"]))
    migrate_runs(store, v2, request, clock.now(), OPS)  # committed, not projected yet
    woken = ops.wake_on_event(store, event("order.paid", {"id": "o-1"}), clock.now())
    assert woken == []  # its append met the migration's events: lost here ...
    ops.project_pending(store, clock.now())  # ... and found by the migrated row's look-back
    assert pending(store, run_id)["awaited_event_id"] is not None
    resume_open(store, v2, run_id, clock.now())
    assert result_of(store, run_id)["payment"] == {"id": "o-1"}


def test_a_dry_run_shows_what_would_move_and_what_else_differs_and_writes_nothing(
    store: Store, clock: ManualClock
) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    before = stream_types(store, run_id)
    report = migrate(store, registry_of(V2), clock.now(), "0=1", dry_run=True)
    [move] = report.moves
    assert (move.outcome, move.to_path, report.dry_run) == ("would-move", [{"i": 1}], True)
    assert move.difference == "step 0 (wait_for_event): wait_for_event → compute"
    assert move.waiting == "step 0: a wait_for_event for 'order.paid' under 'payment'"
    assert stream_types(store, run_id) == before
    assert pending(store, run_id)["step_index"] == 0


def test_only_runs_not_on_the_target_and_of_the_tenant_asked_for_are_selected(
    store: Store, clock: ManualClock
) -> None:
    start(store, V1, clock.now(), "o-1")
    start(store, V1, clock.now(), "o-2", tenant=TENANT_B)
    start(store, V2, clock.now(), "o-3")
    report = migrate(store, registry_of(V1, V2), clock.now(), "0=1", tenant=TENANT_A)
    assert [(m.run_id, m.outcome) for m in report.moves] == [(run_id_for("order", "o-1"), "moved")]
    assert report.already_there == 1
    assert ops.load_run(store, TENANT_B, run_id_for("order", "o-2")).fingerprint == V1.fingerprint


# --- refusals ------------------------------------------------------------------------------


def _refused(store: Store, clock: ManualClock, target: WorkflowDefinition, *mapping: str) -> str:
    run_id = start(store, V1, clock.now(), "o-1")
    before = stream_types(store, run_id)
    [move] = migrate(store, registry_of(target), clock.now(), *mapping).moves
    assert move.outcome == "refused" and move.why is not None
    assert stream_types(store, run_id) == before  # nothing written for it
    assert ops.load_run(store, TENANT_A, run_id).fingerprint == V1.fingerprint
    return move.why


def test_a_run_whose_place_holds_another_kind_of_step_is_refused(
    store: Store, clock: ManualClock
) -> None:
    why = _refused(store, clock, V2)  # no mapping: its own step 0 is a compute in v2
    assert why == (
        "v2 step 0 is a compute; the run waits at a wait_for_event for 'order.paid' under 'payment'"
    )


def test_a_wait_for_another_event_type_or_under_another_key_is_refused(
    store: Store, clock: ManualClock
) -> None:
    shipped = order(2, lambda s: [s.wait_for_event("shipped", timeout="P7D", result_key="payment")])
    assert "a wait_for_event for 'order.shipped' under 'payment'" in _refused(store, clock, shipped)


def test_a_place_the_target_does_not_have_is_refused(store: Store, clock: ManualClock) -> None:
    assert _refused(store, clock, V2, "0=7") == (
        "v2 step 7 does not exist (or the run's path does not lead there)"
    )


def test_an_unknown_workflow_or_version_is_bad_input_with_the_closest_names(
    store: Store, clock: ManualClock
) -> None:
    with pytest.raises(InvalidInput, match="did you mean 'order'"):
        migrate_runs(store, registry_of(V2), MigrationRequest("ordr", 2), clock.now(), OPS)
    with pytest.raises(InvalidInput, match=r"order has no version 3 registered \(registered: v2\)"):
        migrate_runs(store, registry_of(V2), MigrationRequest("order", 3), clock.now(), OPS)


# --- tasks, callbacks, redrive ---------------------------------------------------------------


def charge(ctx: Any) -> dict[str, Any]:
    return {"charged": ctx.event.payload["id"]}


def test_a_task_keeps_its_id_and_runs_its_step_where_the_run_moved(
    store: Store, clock: ManualClock
) -> None:
    v1 = order(1, lambda s: [s.task("charge", charge), s.return_({"v": 1, "c": Steps["charge"]})])
    v2 = order(
        2,
        lambda s: [
            s.compute("plan", lambda ctx: "pro"),
            s.task("charge", charge),
            s.return_({"v": 2, "c": Steps["charge"]}),
        ],
    )
    run_id = start(store, v1, clock.now(), "o-1")
    [task_id] = [r["task_id"] for r in store.conn.execute("SELECT task_id::text FROM task_queue")]
    target = registry_of(v2)
    assert migrate(store, target, clock.now(), "0=1").complete
    row = store.conn.execute(
        "SELECT path, definition_fingerprint FROM task_queue WHERE task_id = %s", (task_id,)
    ).fetchone()
    assert (row["path"], row["definition_fingerprint"]) == ([{"i": 1}], v2.fingerprint)
    ports = TaskPorts(target, mailer=None, http=None, guard=None)  # type: ignore[arg-type]
    done = run_task(store, ports, clock.now, lambda: 60.0)
    assert done is not None and (done.outcome, done.task_id) == ("completed", task_id)
    ops.project_pending(store, clock.now())
    resume_open(store, target, run_id, clock.now())
    assert result_of(store, run_id) == {"v": 2, "c": {"charged": "o-1"}}


def test_a_task_under_another_key_is_refused(store: Store, clock: ManualClock) -> None:
    v1 = order(1, lambda s: [s.task("charge", charge)])
    v2 = order(2, lambda s: [s.task("capture", charge)])
    start(store, v1, clock.now(), "o-1")
    [move] = migrate(store, registry_of(v2), clock.now()).moves
    assert move.why == "v2 step 0 is a task 'capture'; the run waits at a task 'charge'"


def test_a_parallels_tasks_follow_it_to_their_new_positions(
    store: Store, clock: ManualClock
) -> None:
    def steps(first: Callable[[Any], list[Any]], inner: Callable[[Any], list[Any]]) -> Any:
        return lambda s: [*first(s), s.parallel(*inner(s), result_key="both")]

    v1 = order(1, steps(lambda s: [], lambda s: [s.task("a", charge), s.task("b", charge)]))
    v2 = order(
        2,
        steps(
            lambda s: [s.compute("plan", lambda ctx: 1)],
            lambda s: [s.task("a", charge), s.task("b", charge)],
        ),
    )
    start(store, v1, clock.now(), "o-1")
    assert migrate(store, registry_of(v2), clock.now(), "0=1").complete
    paths = store.conn.execute("SELECT task_key, path FROM task_queue ORDER BY task_key").fetchall()
    assert [(r["task_key"], r["path"]) for r in paths] == [
        ("a", [{"i": 1}, {"i": 0}]),
        ("b", [{"i": 1}, {"i": 1}]),
    ]


def test_a_callback_token_completes_the_wait_where_it_moved(
    store: Store, clock: ManualClock
) -> None:
    def approval(version: int, first: list[str]) -> WorkflowDefinition:
        return order(
            version,
            lambda s: [
                *[s.compute(key, lambda ctx: ctx.callback.token) for key in first],
                s.wait_for_callback("decision", timeout="P2D"),
                s.return_({"v": version, "decision": Steps["decision"]}),
            ],
        )

    v1, v2 = approval(1, ["token"]), approval(2, ["token", "again"])
    run_id = start(store, v1, clock.now(), "o-1")
    token = store.results.of_run(TENANT_A, run_id).values["token"]
    target = registry_of(v2)
    assert migrate(store, target, clock.now(), "1=2").complete
    row = store.conn.execute("SELECT step_index, path FROM callbacks").fetchone()
    assert (row["step_index"], row["path"]) == (2, [{"i": 2}])
    completion = complete_callback(store, token, {"ok": True}, clock.now())
    assert completion.step_index == 2
    ops.project_pending(store, clock.now())
    resume_open(store, target, run_id, clock.now())
    assert result_of(store, run_id) == {"v": 2, "decision": {"ok": True}}


def test_a_migrated_run_that_fails_is_redriven_where_it_was_moved_to(
    store: Store, clock: ManualClock
) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    v2 = registry_of(V2)
    assert migrate(store, v2, clock.now(), "0=1").complete
    pay(store, clock.now(), "o-1")
    BROKEN["after"] = True
    try:
        resume_open(store, v2, run_id, clock.now())
    finally:
        BROKEN["after"] = False
    assert stream_types(store, run_id)[-1] == "workflow.run-failed"
    redriven = redrive_run(store, TENANT_A, run_id, clock.now(), registry=v2)
    assert (redriven.outcome, redriven.path) == ("completed", [{"i": 1}])
    assert result_of(store, run_id)["payment"] == {"id": "o-1", "amount": 9}


def test_the_doctor_judges_a_migrated_run_where_it_was_moved_to(
    store: Store, clock: ManualClock
) -> None:
    start(store, V1, clock.now(), "o-1")
    v2 = registry_of(V2)
    assert migrate(store, v2, clock.now(), "0=1").complete
    [pinned] = pinned_definitions(store, v2)
    assert (pinned.fingerprint, pinned.version, pinned.exact) == (V2.fingerprint, 2, 1)
    assert list(pinned.steps) == ["step 1 (wait_for_event)"]
    # A later deploy that renames the key of the step it was moved to fails it: judged
    # at its new path, not at the one its suspension event recorded.
    renamed = order(
        2,
        lambda s: [
            s.compute("plan", lambda ctx: "pro"),
            s.wait_for_event("paid", timeout="P7D", result_key="paid"),
            s.return_({"isSuccess": True, "paid": Steps["paid"]}),
        ],
    )
    [pinned] = pinned_definitions(store, registry_of(renamed))
    assert pinned.failing == 1
    assert pinned.differences == {
        "step 1 (wait_for_event)": "v2: step 1 (wait_for_event): resultKey 'payment' → 'paid'"
    }


def test_a_second_migration_moves_the_run_again(store: Store, clock: ManualClock) -> None:
    run_id = start(store, V1, clock.now(), "o-1")
    v3 = order(
        3,
        lambda s: [
            s.compute("plan", lambda ctx: "pro"),
            s.compute("more", lambda ctx: 1),
            s.wait_for_event("paid", timeout="P7D", result_key="payment"),
            s.return_({"isSuccess": True, "v": 3, "payment": Steps["payment"]}),
        ],
    )
    both = registry_of(V2, v3)
    assert migrate(store, both, clock.now(), "0=1").complete
    assert migrate(store, both, clock.now(), "1=2", to_version=3).complete
    moves = [
        e.fact for e in store.streams.load(TENANT_A, run_id) if isinstance(e.fact, RunMigrated)
    ]
    assert [(m.from_step_index, m.to_step_index) for m in moves] == [(0, 1), (1, 2)]
    pay(store, clock.now(), "o-1")
    result = ops.resume_run(store, TENANT_A, run_id, 0, clock.now(), registry=both)
    assert result.outcome == "completed" and result_of(store, run_id)["v"] == 3
