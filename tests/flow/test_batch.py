"""Batch on real PostgreSQL and in the test kit: one run per batch of trigger events of
a key (`ctx.events`, in arrival order, in its passes and its tasks), started when
`max_size` arrived or `timeout` passed since the first; the next trigger opens a new
batch; each key batches on its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import Batch, Debounce, Event, Steps, define_workflow, on_event
from workflow_runner.engine.passes import load_run
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.store import Store
from workflow_runner.testing import WorkflowTestEnv

from tests.flow.flows import T0, at, put, settle
from tests.support import TENANT_A

MakeEnv = Callable[..., WorkflowTestEnv]


def _runs(store: Store) -> list[tuple[str, Any]]:
    rows = store.runs.for_tenant(TENANT_A, "batched", limit=100)
    found = []
    for row in sorted(rows, key=lambda r: (r.started_at, r.run_id)):
        state = load_run(store, TENANT_A, row.run_id)
        found.append((row.status, state))
    return found


def _result(store: Store, run_id: str) -> Any:
    row = store.results.of_run(TENANT_A, run_id)
    return row.values


def test_a_full_batch_starts_one_run_with_every_event_in_arrival_order(store: Store) -> None:
    # When: three triggers of account a-1 arrive (max_size 3)
    started = [put(store, "batched", n, now=at(n)) for n in (1, 2, 3)]

    # Then: the first opened the batch (one run, held); the others joined it
    assert len(started[0]) == 1 and started[1:] == [[], []]
    (run_id,) = started[0]
    assert load_run(store, TENANT_A, run_id).status == "waiting"

    # When: its due work runs (the third made it due at once)
    settle(store, at(3))

    # Then: the run saw the three events, in its pass and in its task
    state = load_run(store, TENANT_A, run_id)
    assert state.status == "completed"
    assert _result(store, run_id)["seen"] == [1, 2, 3]
    events, _ = store.streams.load_run(TENANT_A, run_id)
    assert events[-1].fact.result == {"ns": [1, 2, 3], "task": [1, 2, 3]}  # type: ignore[attr-defined]

    # And: the next trigger opens a new batch
    (fourth,) = put(store, "batched", 4, now=at(4))
    assert fourth != run_id


def test_a_partial_batch_starts_when_its_timeout_passed_since_the_first(store: Store) -> None:
    (run_id,) = put(store, "batched", 1, now=at(0))
    assert put(store, "batched", 2, now=at(30)) == []
    (other_key,) = put(store, "batched", 3, now=at(31), account="a-2")

    settle(store, at(59))
    assert load_run(store, TENANT_A, run_id).status == "waiting"  # not a minute yet

    settle(store, at(60))
    assert load_run(store, TENANT_A, run_id).status == "completed"
    assert _result(store, run_id)["seen"] == [1, 2]
    assert load_run(store, TENANT_A, other_key).status == "waiting"  # its own minute
    settle(store, at(91))
    assert _result(store, other_key)["seen"] == [3]


def test_a_workflow_without_batch_sees_its_one_event_as_ctx_events(store: Store) -> None:
    registry_name = "one-event"
    flow = define_workflow(
        name=registry_name,
        trigger=on_event("one.go"),
        steps=lambda s: [s.compute("n", lambda ctx: len(ctx.events)), s.return_(Steps["n"])],
        register=False,
    )
    from workflow_runner import DomainEvent, WorkflowRegistry
    from workflow_runner.engine.ingest import ingest_domain_event

    registry = WorkflowRegistry()
    registry.register(flow)
    event = DomainEvent(id="e1", type="one.go", payload={}, tenant_id=TENANT_A, time=T0)
    (outcome,) = ingest_domain_event(store, event, T0, registry).started
    events, _ = store.streams.load_run(TENANT_A, outcome.run_id)
    assert events[-1].fact.result == 1  # type: ignore[attr-defined]


def test_batch_and_debounce_cannot_be_combined() -> None:
    with pytest.raises(WorkflowDefinitionError, match="debounce and batch"):
        define_workflow(
            name="both",
            trigger=on_event("x.go"),
            batch=Batch(10, "PT1M"),
            debounce=Debounce("PT1M", key=Event.payload["k"]),
            steps=lambda s: [s.return_({})],
            register=False,
        )


def _total(ctx: Any) -> Any:
    return sum(e.payload["amount"] for e in ctx.events)


def test_the_test_kit_batches_by_size_and_by_timeout_in_business_time(make_env: MakeEnv) -> None:
    invoice = define_workflow(
        name="invoice",
        trigger=on_event("usage.recorded"),
        batch=Batch(2, "PT30S", key=Event.payload["customer"]),
        steps=lambda s: [
            s.compute("total", _total),
            s.compute("count", lambda ctx: len(ctx.events)),
            s.return_({"total": Steps["total"], "count": Steps["count"]}),
        ],
        register=False,
    )
    env = make_env(workflows=[invoice])
    for amount in (1, 2, 3, 4, 5):
        env.put_event(
            tenant=TENANT_A, type="usage.recorded", payload={"customer": "c", "amount": amount}
        )
    results = sorted(
        (r.result["count"], r.result["total"])
        for r in env.runs(tenant=TENANT_A, workflow="invoice")
        if r.status == "completed"
    )
    assert results == [(2, 3), (2, 7)]  # two full batches at once; the fifth waits

    env.advance("PT30S")
    runs = env.runs(tenant=TENANT_A, workflow="invoice")
    assert len(runs) == 3 and {r.status for r in runs} == {"completed"}
    assert sorted(r.result["total"] for r in runs) == [3, 5, 7]


def test_a_batch_of_more_than_100_events_is_refused_at_definition() -> None:
    with pytest.raises(WorkflowDefinitionError, match="max_size must be at most 100"):
        Batch(101, "PT1M")
    assert Batch(100, "PT1M").max_size == 100
