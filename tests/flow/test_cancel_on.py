"""cancel_on on real PostgreSQL: an arriving event that matches cancels the unsettled
runs it names (recorded as cancelled by that event), within its window, in its tenant,
their children with them; other runs, settled runs and workflows without cancel_on are
left alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from workflow_runner import (
    CancelOn,
    DomainEvent,
    Event,
    WorkflowRegistry,
    define_workflow,
    on_call,
    on_event,
    run_id_for,
)
from workflow_runner.engine.ingest import ingest_domain_event, ingest_domain_events
from workflow_runner.engine.passes import load_run
from workflow_runner.store import Store
from workflow_runner.stream import RunCancelled
from workflow_runner.testing import WorkflowTestEnv

from tests.flow.flows import T0
from tests.support import TENANT_A, TENANT_B

MakeEnv = Callable[..., WorkflowTestEnv]


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="reminders",
            trigger=on_event("order.placed"),
            idempotency_key=Event.payload["orderId"],
            cancel_on=[
                CancelOn("order.cancelled", match={"orderId": Event.payload["orderId"]}),
                CancelOn(
                    "customer.closed",
                    match={"customer.id": Event.payload["customerId"]},
                    within="PT1H",
                ),
            ],
            steps=lambda s: [s.wait(for_="P1D"), s.return_({"sent": True})],
            register=False,
        )
    )
    registry.register(
        define_workflow(
            name="plain",
            trigger=on_event("order.placed"),
            idempotency_key=Event.payload["orderId"],
            steps=lambda s: [s.wait(for_="P1D"), s.return_({"ok": True})],
            register=False,
        )
    )
    return registry


REGISTRY = _registry()


def _put(
    store: Store, type_: str, payload: dict[str, Any], now: datetime, tenant: str = TENANT_A
) -> None:
    event = DomainEvent(
        id=f"{type_}-{len(str(payload))}-{sorted(payload.items())}-{now.isoformat()}",
        type=type_,
        payload=payload,
        tenant_id=tenant,
        time=now,
    )
    ingest_domain_event(store, event, now, REGISTRY)


def _order(n: int, customer: str = "c-1") -> dict[str, Any]:
    return {"orderId": f"o-{n}", "customerId": customer}


def _cancelled(store: Store, run_id: str, tenant: str = TENANT_A) -> RunCancelled | None:
    events, _ = store.streams.load_run(tenant, run_id)
    found = [e.fact for e in events if isinstance(e.fact, RunCancelled)]
    return found[0] if found else None


def _status(store: Store, workflow: str, key: str, tenant: str = TENANT_A) -> str:
    return load_run(store, tenant, run_id_for(workflow, key)).status


def test_an_event_that_matches_cancels_the_run_it_names_recorded_as_cancelled_by_it(
    store: Store,
) -> None:
    # Given: two orders' reminder runs waiting, and a run of a workflow without cancel_on
    _put(store, "order.placed", _order(1), T0)
    _put(store, "order.placed", _order(2), T0)

    # When: order o-1 is cancelled
    _put(store, "order.cancelled", {"orderId": "o-1"}, T0 + timedelta(minutes=5))

    # Then: o-1's run is cancelled by that event; o-2's and the other workflow's wait on
    assert _status(store, "reminders", "o-1") == "cancelled"
    fact = _cancelled(store, run_id_for("reminders", "o-1"))
    assert fact is not None and fact.reason is not None
    assert "cancel_on" in fact.reason and "order.cancelled" in fact.reason
    assert _status(store, "reminders", "o-2") == "waiting"
    assert _status(store, "plain", "o-1") == "waiting"
    # And: no row is left to cancel o-1 twice; o-2's row is still there
    rows = store.conn.execute(
        "SELECT run_id::text AS run_id FROM flow_cancel_keys WHERE event_type = %s",
        ("order.cancelled",),
    ).fetchall()
    assert [r["run_id"] for r in rows] == [run_id_for("reminders", "o-2")]


def test_a_cancel_reads_a_dotted_path_and_spares_runs_older_than_its_window(
    store: Store,
) -> None:
    # Given: a run of customer c-1 started at T0, another at T0 + 90 min
    _put(store, "order.placed", _order(1), T0)
    _put(store, "order.placed", _order(2), T0 + timedelta(minutes=90))

    # When: the customer is closed at T0 + 2 h (within="PT1H")
    _put(store, "customer.closed", {"customer": {"id": "c-1"}}, T0 + timedelta(hours=2))

    # Then: only the run started within the hour before is cancelled
    assert _status(store, "reminders", "o-1") == "waiting"
    assert _status(store, "reminders", "o-2") == "cancelled"


def test_a_cancel_event_names_only_its_tenants_unsettled_runs_and_misses_without_its_field(
    store: Store,
) -> None:
    _put(store, "order.placed", _order(1), T0, tenant=TENANT_A)
    _put(store, "order.placed", _order(1), T0, tenant=TENANT_B)
    later = T0 + timedelta(minutes=1)

    _put(store, "order.cancelled", {"other": "o-1"}, later)  # no orderId: names nothing
    assert _status(store, "reminders", "o-1") == "waiting"

    _put(store, "order.cancelled", {"orderId": "o-1"}, later, tenant=TENANT_B)
    assert _status(store, "reminders", "o-1", TENANT_B) == "cancelled"
    assert _status(store, "reminders", "o-1", TENANT_A) == "waiting"


def test_a_settled_run_is_left_alone_and_a_batch_cancels_before_it_starts(store: Store) -> None:
    # Given: o-1's run settled (its day passed: completed)
    from workflow_runner.engine.resume import resume_run

    _put(store, "order.placed", _order(1), T0)
    day = T0 + timedelta(days=1, seconds=1)
    resume_run(store, TENANT_A, run_id_for("reminders", "o-1"), 0, day, registry=REGISTRY)
    assert _status(store, "reminders", "o-1") == "completed"

    # When: its cancel arrives in one intake batch with a new order and that order's cancel
    events = [
        DomainEvent(id=f"b-{i}", type=t, payload=p, tenant_id=TENANT_A, time=day)
        for i, (t, p) in enumerate(
            [
                ("order.cancelled", {"orderId": "o-1"}),
                ("order.placed", _order(3)),
                ("order.cancelled", {"orderId": "o-3"}),
            ]
        )
    ]
    ingest_domain_events(store, events, day, REGISTRY)

    # Then: the completed run stays completed; o-3's run started (its cancel came first in
    # the batch, when o-3 had no run to name)
    assert _status(store, "reminders", "o-1") == "completed"
    assert _cancelled(store, run_id_for("reminders", "o-1")) is None
    assert _status(store, "reminders", "o-3") == "waiting"


def test_a_workflow_without_cancel_on_keeps_no_cancel_rows(store: Store) -> None:
    registry = WorkflowRegistry()
    registry.register(REGISTRY.latest("plain"))
    event = DomainEvent(
        id="p-1", type="order.placed", payload=_order(1), tenant_id=TENANT_A, time=T0
    )
    ingest_domain_event(store, event, T0, registry)
    row = store.conn.execute("SELECT count(*) AS n FROM flow_cancel_keys").fetchone()
    assert row is not None and row["n"] == 0


# --- the test kit --------------------------------------------------------------------------

CHILD = define_workflow(
    name="ship-step",
    trigger=on_call(),
    steps=lambda s: [s.wait(for_="P1D"), s.return_({"shipped": True})],
    register=False,
)
SHIPMENT = define_workflow(
    name="shipment",
    trigger=on_event("order.paid"),
    idempotency_key=Event.payload["orderId"],
    cancel_on=[CancelOn("order.refunded", match={"orderId": Event.payload["orderId"]})],
    steps=lambda s: [
        s.call_workflow("ship-step", result_key="shipped"),
        s.return_({"done": True}),
    ],
    register=False,
)


def test_the_test_kit_cancels_a_run_and_its_children_on_the_matching_event(
    make_env: MakeEnv,
) -> None:
    env = make_env(workflows=[SHIPMENT, CHILD])
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"orderId": "o-9"})
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"orderId": "o-10"})
    env.advance("PT1M")
    children = env.runs(tenant=TENANT_A, workflow="ship-step")
    assert len(children) == 2 and {c.status for c in children} == {"waiting"}

    env.put_event(tenant=TENANT_A, type="order.refunded", payload={"orderId": "o-9"})
    env.advance("PT1M")

    parent = env.run(tenant=TENANT_A, workflow="shipment", key="o-9")
    assert parent.status == "cancelled"
    assert any("order.refunded" in (e.payload.get("reason") or "") for e in parent.events)
    statuses = sorted(c.status for c in env.runs(tenant=TENANT_A, workflow="ship-step"))
    assert statuses == ["cancelled", "waiting"]
    assert env.run(tenant=TENANT_A, workflow="shipment", key="o-10").status == "waiting"
