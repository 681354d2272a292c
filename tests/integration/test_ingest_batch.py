"""An SQS intake batch of trigger events is ingested in one transaction (one commit),
with the same outcome per event as one transaction each: duplicates start once, a
refused first pass fails only its own run, a failure rolls the whole batch back."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from workflow_runner import ManualClock, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.inbox_writes import store_inbox_event
from workflow_runner.errors import TransientStoreError
from workflow_runner.store import Store
from workflow_runner.store.streams import PassWrite, StreamStore

from tests.support import TENANT_A, TENANT_B, event, refuse_pass_writes, register, stream


def _wf(registry: WorkflowRegistry) -> None:
    register(
        registry,
        name="batch-flow",
        trigger=on_event("batch.go"),
        idempotency_key=lambda e: e.payload["k"],
        steps=lambda s: [s.compute("x", lambda ctx: ctx.event.payload["k"]), s.wait(for_="PT1M")],
    )


def test_a_batch_starts_every_run_and_commits_once(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, db_url: str
) -> None:
    _wf(registry)
    events = [
        event("batch.go", {"k": f"k{i}"}, tenant=(TENANT_A, TENANT_B)[i % 2]) for i in range(6)
    ]
    results = ops.ingest_domain_events(store, events, clock.now(), registry)
    assert [r.event_id for r in results] == [e.id for e in events]  # the order given
    assert all(r.stored and [o.outcome for o in r.started] == ["suspended"] for r in results)
    for i, e in enumerate(events):
        run_id = run_id_for("batch-flow", f"k{i}")
        assert [x.type for x in stream(store, run_id, e.tenant_id)] == [
            ev.RUN_STARTED,
            ev.STEP_WAITING,
        ]
    run_ids = [run_id_for("batch-flow", f"k{i}") for i in range(6)]
    with psycopg.connect(db_url) as probe:
        xids = probe.execute(
            "SELECT DISTINCT xid FROM wf_events WHERE stream_id = ANY(%s::uuid[])", [run_ids]
        ).fetchall()
    assert len(xids) == 1  # one transaction wrote every run's first pass


def test_a_duplicate_in_the_batch_and_a_redelivered_batch_start_nothing_twice(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _wf(registry)
    first = event("batch.go", {"k": "same"})
    again = event("batch.go", {"k": "same"}, event_id=first.id)
    other = event("batch.go", {"k": "other"})
    results = ops.ingest_domain_events(store, [first, again, other], clock.now(), registry)
    assert [r.stored for r in results] == [True, False, True]
    redelivered = ops.ingest_domain_events(store, [first, other], clock.now(), registry)
    assert [r.stored for r in redelivered] == [False, False]
    assert len(stream(store, run_id_for("batch-flow", "same"))) == 2


def test_a_refused_first_pass_fails_only_its_own_run(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wf(registry)
    refused = run_id_for("batch-flow", "bad")
    refuse_pass_writes(monkeypatch, refused)
    events = [event("batch.go", {"k": k}) for k in ("a", "bad", "c")]
    results = ops.ingest_domain_events(store, events, clock.now(), registry)
    outcomes = [[(o.outcome, o.reason) for o in r.started] for r in results]
    assert outcomes == [
        [("suspended", None)],
        [("failed", "pass_not_storable")],
        [("suspended", None)],
    ]
    assert [x.type for x in stream(store, refused)] == [ev.RUN_STARTED, ev.RUN_FAILED]


def test_a_transient_error_rolls_the_whole_batch_back(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _wf(registry)
    real = StreamStore.record_passes
    calls: list[int] = []

    def record(self: StreamStore, writes: list[PassWrite], *args: Any) -> Any:
        calls.append(len(writes))  # the batch's passes, written together
        raise TransientStoreError("database error (40001): could not serialize access")

    monkeypatch.setattr(StreamStore, "record_passes", record)
    events = [event("batch.go", {"k": k}) for k in ("p", "q", "r")]
    with pytest.raises(TransientStoreError):
        ops.ingest_domain_events(store, events, clock.now(), registry)
    assert calls == [3]
    assert all(stream(store, run_id_for("batch-flow", k)) == [] for k in ("p", "q", "r"))
    monkeypatch.setattr(StreamStore, "record_passes", real)
    # SQS delivers the batch again: every event starts its run, once.
    results = ops.ingest_domain_events(store, events, clock.now(), registry)
    assert [r.stored for r in results] == [True, True, True]


def test_two_events_of_one_run_in_a_batch_start_it_once_from_the_first_in_id_order(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _wf(registry)
    later = event("batch.go", {"k": "shared"}, event_id="evt-b")
    earlier = event("batch.go", {"k": "shared"}, event_id="evt-a")

    results = ops.ingest_domain_events(store, [later, earlier], clock.now(), registry)

    assert [(r.stored, [o.outcome for o in r.started], r.skipped) for r in results] == [
        (True, [], ["batch-flow"]),
        (True, ["suspended"], []),
    ]
    started = stream(store, run_id_for("batch-flow", "shared"))[0]
    assert started.payload["triggerEventRef"]["eventId"] == "evt-a"


def test_an_event_stored_before_without_its_triggers_is_started_by_the_batch(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """EventWakeup may store an event first (it never starts runs): the intake batch
    that then brings it must still claim and start it."""
    _wf(registry)
    seen = event("batch.go", {"k": "seen"})
    with store.transaction():
        store_inbox_event(store, seen, clock.now())
    fresh = event("batch.go", {"k": "fresh"})

    results = ops.ingest_domain_events(store, [seen, fresh], clock.now(), registry)

    assert [(r.stored, [o.outcome for o in r.started]) for r in results] == [
        (True, ["suspended"]),
        (True, ["suspended"]),
    ]
    assert ops.ingest_domain_events(store, [seen], clock.now(), registry)[0].stored is False


def test_an_event_of_two_workflows_in_a_batch_starts_both_beside_single_workflow_events(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _wf(registry)
    register(
        registry,
        name="batch-audit",
        trigger=on_event("batch.go"),
        idempotency_key=lambda e: e.payload["k"],
        steps=lambda s: [s.compute("y", lambda ctx: 1)],
    )
    register(
        registry,
        name="batch-solo",
        trigger=on_event("batch.solo"),
        idempotency_key=lambda e: e.payload["k"],
        steps=lambda s: [s.compute("z", lambda ctx: 2)],
    )
    both = event("batch.go", {"k": "both"})
    solo = event("batch.solo", {"k": "solo"})

    results = ops.ingest_domain_events(store, [both, solo], clock.now(), registry)

    assert [sorted((o.workflow_name, o.outcome) for o in r.started) for r in results] == [
        [("batch-audit", "completed"), ("batch-flow", "suspended")],
        [("batch-solo", "completed")],
    ]


def test_a_trigger_event_stored_now_is_written_claimed_in_one_row_version(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """A new event is stored with its triggers claimed: no second version of its inbox
    row (an update would write one, and an entry in each of the inbox's indexes); one
    EventWakeup stored first is claimed by an update, once."""
    _wf(registry)
    seen = event("batch.go", {"k": "seen"})
    with store.transaction():
        store_inbox_event(store, seen, clock.now())
    fresh = [event("batch.go", {"k": f"k{i}"}) for i in range(3)]

    with store.transaction():
        results = ops.ingest_domain_events(store, [*fresh, seen], clock.now(), registry)
        row = store.conn.execute(
            "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'inbox'"
        ).fetchone()

    assert all(r.stored for r in results)
    assert row is not None and row["n_tup_upd"] == 1  # the event stored before only
    claimed = store.conn.execute(
        "SELECT count(*) AS n FROM inbox WHERE triggered_at IS NOT NULL"
    ).fetchone()
    assert claimed is not None and claimed["n"] == 4
