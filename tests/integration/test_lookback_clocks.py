"""Whether an awaited event counts as "after the run started" is decided on one clock:
the events' own times as EventBridge stamped them, never the receiving functions'
clocks (issue 11, item 1). Both functions' clocks are skewed by seconds, both ways, and
EventBridge delivers the awaited event before the trigger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from workflow_runner import DomainEvent, define_workflow, on_event, run_id_for
from workflow_runner import engine as ops
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.store import Store

from tests.support import TENANT_A, stream_types

PLACED = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)  # order.placed's EventBridge time
SKEWS = [timedelta(seconds=s) for s in (-5, -3, -1, 0, 1, 3, 5)]


def _approval(registry: WorkflowRegistry, lookback: Any = None, first: Any = None) -> None:
    registry.register(
        define_workflow(
            name="approval",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["orderId"],
            awaits={"approved": "order.approved"},
            register=False,
            steps=lambda s: [
                *([first(s)] if first else []),
                s.wait_for_event(
                    event="order.approved",
                    match=lambda ctx: {
                        "version": 1,
                        "expr": {
                            "kind": "atom",
                            "path": ["orderId"],
                            "op": {"kind": "eq", "value": ctx.event.payload["orderId"]},
                        },
                    },
                    timeout="P3D",
                    lookback=lookback,
                ),
                s.return_(lambda ctx: {"approval": ctx.steps["order.approved"]}),
            ],
        )
    )


def _event(type_: str, order: str, at: datetime, event_id: str | None = None) -> DomainEvent:
    return DomainEvent(
        id=event_id or f"{type_}-{order}-{at.isoformat()}",
        type=type_,
        payload={"tenantId": TENANT_A, "orderId": order},
        tenant_id=TENANT_A,
        time=at,
        source="shop",
    )


def _place(store: Store, registry: WorkflowRegistry, order: str, clock: datetime) -> str:
    """TriggerProjection, its clock at `clock`, then the nudged projection."""
    ops.ingest_domain_event(store, _event("order.placed", order, PLACED), clock, registry)
    ops.project_pending(store, clock)
    return run_id_for("approval", order)


def _approve(store: Store, order: str, at: datetime, clock: datetime) -> list[ops.WokenRun]:
    """EventWakeup, its clock at `clock`, for an approval EventBridge stamped `at`."""
    return ops.wake_on_event(store, _event("order.approved", order, at), clock)


def _matched(store: Store, run_id: str) -> bool:
    return ev.STEP_EVENT_MATCHED in stream_types(store, run_id)


def test_an_approval_after_the_order_wakes_the_wait_whatever_the_functions_clocks(
    store: Store, registry: WorkflowRegistry
) -> None:
    _approval(registry)
    missed = []
    for trigger_skew in SKEWS:
        for wakeup_skew in SKEWS:
            order = (
                f"o-after-{int(trigger_skew.total_seconds())}-{int(wakeup_skew.total_seconds())}"
            )
            run_id = _place(
                store, registry, order, PLACED + timedelta(milliseconds=400) + trigger_skew
            )
            # Approved a second later, received 300 ms after that by a clock off by wakeup_skew.
            approved = PLACED + timedelta(seconds=1)
            received = approved + timedelta(milliseconds=300) + wakeup_skew
            if [w.run_id for w in _approve(store, order, approved, received)] != [run_id]:
                missed.append((trigger_skew, wakeup_skew))
    assert missed == []


def test_an_approval_delivered_before_its_order_is_found_by_the_look_back(
    store: Store, registry: WorkflowRegistry
) -> None:
    """EventBridge does not order deliveries to two rules: approved, emitted 50 ms after
    placed (the same second), reaches EventWakeup first."""
    _approval(registry)
    missed = []
    for trigger_skew in SKEWS:
        for wakeup_skew in SKEWS:
            order = (
                f"o-early-{int(trigger_skew.total_seconds())}-{int(wakeup_skew.total_seconds())}"
            )
            approved = (PLACED + timedelta(milliseconds=50)).replace(microsecond=0)
            assert _approve(store, order, approved, PLACED + wakeup_skew) == []
            started = PLACED + timedelta(milliseconds=200) + trigger_skew
            if not _matched(store, _place(store, registry, order, started)):
                missed.append((trigger_skew, wakeup_skew))
    assert missed == []


def test_a_trigger_retried_minutes_later_still_takes_the_approval_that_came_meanwhile(
    store: Store, registry: WorkflowRegistry
) -> None:
    _approval(registry)
    approved = PLACED + timedelta(seconds=5)
    assert _approve(store, "o-retry", approved, approved) == []
    # TriggerProjection failed and EventBridge retried it four minutes later.
    run_id = _place(store, registry, "o-retry", PLACED + timedelta(minutes=4))
    assert _matched(store, run_id)


def test_an_approval_from_before_the_order_never_wakes_it(
    store: Store, registry: WorkflowRegistry
) -> None:
    """The other side of the same rule: an event older than the trigger is not taken,
    even when the clock that received it runs ahead of the one that started the run."""
    _approval(registry)
    stale = PLACED - timedelta(seconds=2)
    for wakeup_skew in SKEWS:
        order = f"o-stale-{int(wakeup_skew.total_seconds())}"
        _approve(store, order, stale, PLACED + timedelta(seconds=1) + wakeup_skew)
        run_id = _place(store, registry, order, PLACED - timedelta(seconds=3))
        assert not _matched(store, run_id)
        late_copy = _event("order.approved", order, stale, event_id=f"again-{order}")
        assert ops.wake_on_event(store, late_copy, PLACED + timedelta(seconds=5)) == []


def test_an_explicit_lookback_is_measured_from_the_wait_on_the_events_times(
    store: Store, registry: WorkflowRegistry
) -> None:
    _approval(registry, lookback="PT1H", first=lambda s: s.wait(for_="PT2H"))
    run_id = _place(store, registry, "o-hour", PLACED)
    reached = PLACED + timedelta(hours=2)
    _approve(store, "o-hour", reached - timedelta(minutes=70), PLACED + timedelta(minutes=50))
    _approve(store, "o-hour", reached - timedelta(minutes=30), reached - timedelta(minutes=30))
    ops.resume_run(store, TENANT_A, run_id, 0, reached, registry=registry)
    ops.project_pending(store, reached)
    events = store.streams.load(TENANT_A, run_id)
    (matched,) = [e for e in events if e.type == ev.STEP_EVENT_MATCHED]
    assert matched.payload["eventId"].endswith((reached - timedelta(minutes=30)).isoformat())


def test_lookback_zero_takes_an_event_of_the_same_second_as_the_wait(
    store: Store, registry: WorkflowRegistry
) -> None:
    """EventBridge times are whole seconds: an event stamped in the second the wait
    began may have happened after it, so that second counts as after."""
    _approval(registry, lookback="PT0S")
    run_id = _place(store, registry, "o-zero", PLACED + timedelta(milliseconds=700))
    woken = _approve(store, "o-zero", PLACED, PLACED + timedelta(milliseconds=900))
    assert [w.run_id for w in woken] == [run_id]
