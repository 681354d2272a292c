"""Starting runs from domain events (seeds' workflow-runner integration test and
event-trigger behaviour), on real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from workflow_runner import Event, ManualClock, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.redrive import RedriveRefused, redrive_run
from workflow_runner.store import Store

from tests.support import TENANT_A, TENANT_B, event, register, stream, stream_types, trigger


def test_suspending_run_stops_at_its_wait_without_completing(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="wr-suspend",
        trigger=on_event("wr-test.suspend"),
        idempotency_key=lambda e: e.payload["runKey"],
        steps=lambda s: [s.wait(for_="PT1H"), s.return_({"isSuccess": True})],
    )
    key = str(uuid.uuid4())
    result = trigger(store, registry, "wr-test.suspend", {"runKey": key}, clock.now())
    run_id = run_id_for(wf.name, key)
    assert [o.outcome for o in result.started] == ["suspended"]
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert store.runs.get(TENANT_A, run_id).status == "waiting"


def test_run_started_references_the_trigger_event_and_never_copies_it(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="wr-ref",
        trigger=on_event("wr-test.ref"),
        idempotency_key="single",
        steps=lambda s: [s.wait(for_="PT1H")],
    )
    trigger(
        store,
        registry,
        "wr-test.ref",
        {"secret": "alice@example.com"},
        clock.now(),
        event_id="evt-1",
    )
    events = stream(store, run_id_for(wf.name, "single"))
    started = events[0].payload
    assert started["triggerEventRef"] == {"eventId": "evt-1"}
    assert started["definitionFingerprint"] == wf.fingerprint
    assert started["idempotencyKey"] == "single"
    assert all("alice@example.com" not in str(e.payload) for e in events)
    assert events[1].payload["definitionFingerprint"] == wf.fingerprint


def test_completed_run_records_run_completed_with_the_step_count(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="wr-sync",
        trigger=on_event("wr-test.sync"),
        steps=lambda s: [s.compute("a", lambda c: 1), s.return_({"isSuccess": True})],
    )
    result = trigger(store, registry, "wr-test.sync", {}, clock.now(), event_id="e-sync")
    run_id = result.started[0].run_id
    assert run_id == run_id_for(wf.name, "event:e-sync")
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.RUN_COMPLETED]
    assert stream(store, run_id)[1].payload["stepIndex"] == 2


def test_failing_pipeline_is_recorded_as_run_failed_and_not_raised(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    def boom(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("boom-explicit-failure for bob@example.com")

    register(
        registry,
        name="wr-fail",
        trigger=on_event("wr-test.fail"),
        steps=lambda s: [s.compute("x", boom)],
    )
    result = trigger(store, registry, "wr-test.fail", {}, clock.now())
    run_id = result.started[0].run_id
    assert result.started[0].outcome == "failed"
    assert stream_types(store, run_id) == [ev.RUN_STARTED, ev.RUN_FAILED]
    failed = stream(store, run_id)[1].payload
    assert failed["error"] == "workflow step failed (ValueError)"
    assert failed["stepIndex"] == 0
    assert "bob@example.com" not in str(failed)


def test_filter_false_starts_nothing_and_a_throwing_filter_is_recorded(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="wr-filter",
        trigger=on_event("wr-test.filter", filter=lambda e: e.payload["total"] > 0),
        steps=lambda s: [s.return_()],
    )
    skipped = trigger(store, registry, "wr-test.filter", {"total": 0}, clock.now())
    assert skipped.started == [] and skipped.skipped == ["wr-filter"]
    broken = trigger(store, registry, "wr-test.filter", {"no-total": 1}, clock.now())
    assert [(o.outcome, o.reason) for o in broken.started] == [("failed", "trigger_filter_failed")]


def test_second_trigger_for_an_existing_run_id_is_a_no_op(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="wr-once",
        trigger=on_event("wr-test.once"),
        idempotency_key=lambda e: e.payload["k"],
        steps=lambda s: [s.wait(for_="PT1H")],
    )
    first = trigger(store, registry, "wr-test.once", {"k": "same"}, clock.now())
    second = trigger(store, registry, "wr-test.once", {"k": "same"}, clock.now())
    assert len(first.started) == 1
    assert second.started == [] and second.skipped == ["wr-once"]
    assert stream_types(store, run_id_for(wf.name, "same")) == [ev.RUN_STARTED, ev.STEP_WAITING]


def test_redelivered_event_starts_nothing_even_without_an_idempotency_key(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    register(
        registry,
        name="wr-nokey",
        trigger=on_event("wr-test.nokey"),
        steps=lambda s: [s.wait(for_="PT1H")],
    )
    e = event("wr-test.nokey", {"n": 1}, event_id="dup-1")
    first = ops.ingest_domain_event(store, e, clock.now(), registry)
    again = ops.ingest_domain_event(store, e, clock.now(), registry)
    assert len(first.started) == 1 and first.stored
    assert not again.stored and again.started == []
    assert len(store.runs.for_tenant(TENANT_A)) == 1


def test_tenants_sharing_a_run_id_get_separate_runs(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = register(
        registry,
        name="wr-tenants",
        trigger=on_event("wr-test.t"),
        idempotency_key="same-key",
        steps=lambda s: [s.wait(for_="PT1H")],
    )
    trigger(store, registry, "wr-test.t", {}, clock.now(), tenant=TENANT_A)
    trigger(store, registry, "wr-test.t", {}, clock.now(), tenant=TENANT_B)
    run_id = run_id_for(wf.name, "same-key")
    assert stream_types(store, run_id, TENANT_A) == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert stream_types(store, run_id, TENANT_B) == [ev.RUN_STARTED, ev.STEP_WAITING]
    assert (
        len(store.pending.for_tenant(TENANT_A)) == 1
        and len(store.pending.for_tenant(TENANT_B)) == 1
    )


def test_a_key_reference_to_a_missing_field_names_the_field(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """A missing email says unresolved_reference:event.payload.email; a missing key field
    now says which field as well (the path comes from the definition, not the data)."""
    register(
        registry,
        name="wr-keyed",
        trigger=on_event("wr-test.keyed"),
        idempotency_key=Event.payload["order"]["id"],
        steps=lambda s: [s.return_()],
    )
    result = trigger(store, registry, "wr-test.keyed", {"order": {}}, clock.now())
    [outcome] = result.started
    assert (outcome.outcome, outcome.reason) == (
        "failed",
        "idempotency_key_failed:event.payload.order.id",
    )
    failed = stream(store, outcome.run_id)[-1].payload
    assert failed["reason"] == "idempotency_key_failed:event.payload.order.id"
    assert failed["error"] == "workflow step failed (UnresolvedReference)"
    # Still a failure before the first step: a redrive cannot fix it.
    with pytest.raises(RedriveRefused, match="failed before its first step"):
        redrive_run(store, TENANT_A, outcome.run_id, clock.now(), registry)
