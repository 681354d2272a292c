"""Awaited events: no lost wakeups, no lost early events, first match wins."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from workflow_runner import ManualClock, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.store import Store
from workflow_runner.store.sql import Sql

from tests.support import (
    TENANT_A,
    TENANT_B,
    event,
    pending_rows,
    resume_due,
    stream,
    stream_types,
    trigger,
)


def _order_match(ctx: Any) -> dict[str, Any]:
    return {
        "version": 1,
        "expr": {
            "kind": "atom",
            "path": ["orderId"],
            "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
        },
    }


def _approval(
    registry: WorkflowRegistry, first: list[Any] | None = None, lookback: Any = None
) -> Any:
    wf = define_workflow(
        name="approval",
        trigger=on_event("order.placed"),
        idempotency_key=lambda e: e.payload["orderId"],
        awaits={"approved": "order.approved"},
        register=False,
        steps=lambda s: [
            *(first or []),
            s.wait_for_event(
                event="order.approved", match=_order_match, timeout="P3D", lookback=lookback
            ),
            s.return_(lambda ctx: {"isSuccess": True, "approval": ctx.steps["order.approved"]}),
        ],
    )
    registry.register(wf)
    return wf


def _approve(
    store: Store,
    order: str,
    now: Any,
    tenant: str = TENANT_A,
    event_id: str | None = None,
    **extra: Any,
) -> list[ops.WokenRun]:
    return ops.wake_on_event(
        store, event("order.approved", {"orderId": order, **extra}, tenant, event_id), now
    )


def test_awaited_event_after_the_wait_wakes_the_run_at_once_with_its_payload(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o1"}, clock.now())
    run_id = run_id_for("approval", "o1")
    later = clock.now() + timedelta(minutes=5)

    woken = _approve(store, "o1", later, event_id="approval-1", approver="ann")

    assert [(w.run_id, w.step_index) for w in woken] == [(run_id, 0)]
    assert pending_rows(store)[0].wake_at == later
    assert pending_rows(store)[0].awaited_event_id == "approval-1"
    result = ops.resume_run(store, TENANT_A, run_id, 0, later, registry=registry)
    assert result.outcome == "completed"
    events = stream(store, run_id)
    assert [e.type for e in events] == [
        ev.RUN_STARTED,
        ev.STEP_WAITING_FOR_EVENT,
        ev.STEP_EVENT_MATCHED,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]
    assert events[3].payload["awaitedEventId"] == "approval-1"
    assert events[-1].payload["result"]["approval"] == {"orderId": "o1", "approver": "ann"}
    # the awaited payload is referenced on the stream until the end, never copied into a suspension
    assert all("ann" not in str(e.payload) for e in events[:-1])


def test_non_matching_event_does_not_wake_and_a_later_matching_one_does(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o1"}, clock.now())
    assert _approve(store, "other-order", clock.now()) == []
    assert len(_approve(store, "o1", clock.now())) == 1


def test_event_arriving_before_the_wait_step_is_reached_is_not_lost(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    wf = define_workflow(
        name="approval",
        trigger=on_event("order.placed"),
        idempotency_key=lambda e: e.payload["orderId"],
        awaits={"approved": "order.approved"},
        register=False,
        steps=lambda s: [
            s.wait(for_="PT1H"),
            s.wait_for_event(event="order.approved", match=_order_match, timeout="P3D"),
            s.return_(lambda ctx: {"isSuccess": True, "approval": ctx.steps["order.approved"]}),
        ],
    )
    registry.register(wf)
    trigger(store, registry, "order.placed", {"orderId": "o7"}, clock.now())
    early = clock.now() + timedelta(minutes=10)
    assert _approve(store, "o7", early, event_id="early-approval") == []  # nobody waits yet

    resume_due(
        store, registry, clock.now() + timedelta(hours=1)
    )  # reaches the wait; projection looks back

    run_id = run_id_for("approval", "o7")
    assert ev.STEP_EVENT_MATCHED in stream_types(store, run_id)
    resume_due(store, registry, clock.now() + timedelta(hours=1))
    assert stream(store, run_id)[-1].payload["result"]["approval"] == {"orderId": "o7"}


def test_event_racing_the_pending_projection_is_matched_when_the_row_is_created(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    ops.ingest_domain_event(store, event("order.placed", {"orderId": "o2"}), clock.now(), registry)
    # the run is suspended on its stream, but the projection has not created its row yet
    assert _approve(store, "o2", clock.now(), event_id="race-1") == []
    projected = ops.project_pending(store, clock.now())
    assert [w.event_id for w in projected.woken] == ["race-1"]
    assert pending_rows(store)[0].awaited_event_id == "race-1"


def test_lookback_zero_ignores_events_stored_before_the_wait(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry, lookback="PT0S")
    ops.ingest_domain_event(store, event("order.placed", {"orderId": "o3"}), clock.now(), registry)
    clock.advance(timedelta(seconds=1))
    _approve(store, "o3", clock.now() - timedelta(seconds=5))  # stored "before" the wait began
    assert ops.project_pending(store, clock.now()).woken == []


def test_the_first_matching_event_wins_and_a_second_does_not_overwrite_it(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o4"}, clock.now())
    assert len(_approve(store, "o4", clock.now(), event_id="first", approver="ann")) == 1
    assert _approve(store, "o4", clock.now(), event_id="second", approver="bob") == []
    ops.resume_run(store, TENANT_A, run_id_for("approval", "o4"), 0, clock.now(), registry=registry)
    assert (
        stream(store, run_id_for("approval", "o4"))[-1].payload["result"]["approval"]["approver"]
        == "ann"
    )


def test_redelivered_awaited_event_wakes_nothing_twice(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o5"}, clock.now())
    assert len(_approve(store, "o5", clock.now(), event_id="same")) == 1
    assert _approve(store, "o5", clock.now(), event_id="same") == []
    assert stream_types(store, run_id_for("approval", "o5")).count(ev.STEP_EVENT_MATCHED) == 1


def test_timeout_without_a_match_continues_with_none(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o6"}, clock.now())
    results = resume_due(store, registry, clock.now() + timedelta(days=3))
    assert [r.outcome for r in results] == ["completed"]
    done = stream(store, run_id_for("approval", "o6"))
    assert done[-1].payload["result"] == {"isSuccess": True, "approval": None}
    assert done[-2].payload["resumedBy"] == "timeout"


def test_another_tenants_event_never_wakes_a_run(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "shared"}, clock.now(), tenant=TENANT_A)
    assert _approve(store, "shared", clock.now(), tenant=TENANT_B) == []
    assert ops.project_pending(store, clock.now()).woken == []
    assert pending_rows(store)[0].awaited_event_id is None


def test_an_unevaluable_stored_match_is_skipped_without_blocking_other_rows(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o8"}, clock.now())
    trigger(store, registry, "order.placed", {"orderId": "o9"}, clock.now())
    store.conn.execute(
        "UPDATE workflow_run_pending SET match_expr = '{\"version\": 99}' WHERE run_id = %s",
        (run_id_for("approval", "o8"),),
    )
    store.conn.execute(
        "UPDATE workflow_run_pending SET match_expr = NULL, match_key = NULL WHERE run_id = %s",
        (run_id_for("approval", "o9"),),
    )
    woken = _approve(store, "o8", clock.now())
    assert [w.run_id for w in woken] == [run_id_for("approval", "o9")]


@pytest.mark.parametrize("items", [["a", "b"]])
def test_an_event_consumed_by_one_wait_is_not_taken_again_by_the_next(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, items: list[str]
) -> None:
    wf = define_workflow(
        name="two-waits",
        trigger=on_event("go"),
        idempotency_key="k",
        awaits={"tick": "tick"},
        register=False,
        steps=lambda s: [
            s.for_each(
                over=items,
                as_="x",
                do=[
                    s.wait_for_event(event="tick", timeout="P1D"),
                    s.compute(
                        "ticks", lambda ctx: [*ctx.steps.get("ticks", []), ctx.steps["tick"]]
                    ),
                ],
            ),
            s.return_(lambda ctx: {"isSuccess": True, "ticks": ctx.steps["ticks"]}),
        ],
    )
    registry.register(wf)
    trigger(store, registry, "go", {}, clock.now())
    run_id = run_id_for("two-waits", "k")
    ops.wake_on_event(store, event("tick", {"n": 1}, event_id="t1"), clock.now())
    resume_due(
        store, registry, clock.now()
    )  # consumes t1, suspends on the second wait; lookback sees t1
    assert stream(store, run_id)[-1].type == ev.STEP_WAITING_FOR_EVENT
    ops.wake_on_event(store, event("tick", {"n": 2}, event_id="t2"), clock.now())
    resume_due(store, registry, clock.now())
    assert stream(store, run_id)[-1].payload["result"]["ticks"] == [{"n": 1}, {"n": 2}]


def test_erased_awaited_event_fails_the_run_instead_of_resuming_on_missing_data(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    _approval(registry)
    trigger(store, registry, "order.placed", {"orderId": "o10"}, clock.now())
    _approve(store, "o10", clock.now(), event_id="gone")
    store.conn.execute("UPDATE inbox SET detail = NULL, erased_at = now() WHERE event_id = 'gone'")
    result = ops.resume_run(
        store, TENANT_A, run_id_for("approval", "o10"), 0, clock.now(), registry=registry
    )
    assert (result.outcome, result.reason) == ("failed", "awaited_event_unavailable")


def test_wakeup_looks_waits_up_by_the_key_the_event_offers(
    store: Store, registry: WorkflowRegistry, clock: ManualClock
) -> None:
    """Hundreds of waits of one type: the event's key finds its wait, others are not read."""
    _approval(registry)
    for i in range(300):
        ops.ingest_domain_event(
            store, event("order.placed", {"orderId": f"k{i}"}), clock.now(), registry
        )
    ops.project_pending(store, clock.now())
    rows = store.pending.waiting_for(
        TENANT_A, "order.approved", clock.now(), ['[["orderId"],"k7"]']
    )
    assert [r.run_id for r in rows] == [run_id_for("approval", "k7")]
    woken = _approve(store, "k7", clock.now())
    assert [w.run_id for w in woken] == [run_id_for("approval", "k7")]


def test_a_resume_batch_records_the_events_its_runs_took_with_their_passes(
    store: Store, registry: WorkflowRegistry, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_consumed_events rows go out in the batch's record_pass, not one statement a run."""
    _approval(registry)
    orders = ["c1", "c2", "c3"]
    for order in orders:
        trigger(store, registry, "order.placed", {"orderId": order}, clock.now())
        _approve(store, order, clock.now(), event_id=f"ok-{order}")
    sent: list[str] = []
    real_run, real_send = Sql.run, Sql.send

    def run(self: Sql, name: str, params: dict[str, Any]) -> int:
        sent.append(name)
        return real_run(self, name, params)

    def send(self: Sql, name: str, params: dict[str, Any]) -> Any:
        sent.append(name)
        return real_send(self, name, params)

    monkeypatch.setattr(Sql, "run", run)
    monkeypatch.setattr(Sql, "send", send)
    items = [ops.ResumeRequestItem(TENANT_A, run_id_for("approval", o), 0) for o in orders]

    results = ops.resume_runs(store, items, clock.now(), registry)

    assert [getattr(r, "outcome", r) for r in results] == ["completed"] * 3
    assert "consume_events" not in sent and sent.count("record_pass") == 1
    rows = store.conn.execute(
        "SELECT run_id::text AS run_id, event_id FROM run_consumed_events ORDER BY event_id"
    ).fetchall()
    assert [(r["run_id"], r["event_id"]) for r in rows] == [
        (run_id_for("approval", o), f"ok-{o}") for o in orders
    ]
