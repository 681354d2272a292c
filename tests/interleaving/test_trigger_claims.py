"""A trigger event's claim, statement by statement: two deliveries of one event ingested
at once (SQS delivers at least once), EventWakeup storing the event as TriggerProjection
ingests it, and a delivery whose transaction rolls back after storing the event while
another waits on its row. An event stored now is stored with its triggers claimed; one
stored before is claimed by an update that sees what committed before it began. Each pair
runs in every split order on real PostgreSQL (harness.py), and after each:

- the run the event triggers has started exactly once;
- the event's triggers are claimed (a redelivery starts nothing);
- nobody deadlocks, and no operation fails but the one made to.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from workflow_runner import DomainEvent, WorkflowRegistry, define_workflow, on_event, run_id_for
from workflow_runner import stream as ev
from workflow_runner.aws.inprocess import InMemoryResumeQueue
from workflow_runner.clock import ManualClock
from workflow_runner.engine import ingest_domain_events, wake_and_enqueue_many
from workflow_runner.engine.ingest import _store_and_claim
from workflow_runner.store import Store

from tests.interleaving.harness import Lab, Operation, Run, explore
from tests.support import TENANT_A

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
PLACED = DomainEvent("evt-1", "order.placed", {"order": "o1"}, TENANT_A, T0, "shop")
RUN = run_id_for("place", "o1")


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="place",
            trigger=on_event("order.placed"),
            idempotency_key=lambda e: e.payload["order"],
            register=False,
            steps=lambda s: [s.wait(for_="PT1H")],
        )
    )
    return registry


REGISTRY = _registry()


def _nothing(store: Store) -> None:
    pass


def _deliver(store: Store) -> bool:
    """TriggerProjection ingests the event; whether this delivery stored it."""
    (result,) = ingest_domain_events(store, [PLACED], T0, REGISTRY)
    return result.stored


def _wakeup(store: Store) -> None:
    """EventWakeup stores the event (it never claims triggers) and matches no wait."""
    wake_and_enqueue_many(store, InMemoryResumeQueue(ManualClock(T0)), [PLACED], T0)


class _RolledBack(Exception):
    pass


def _store_then_roll_back(store: Store) -> None:
    """A delivery that stores and claims the event, then fails before it commits."""
    with store.transaction():
        _store_and_claim(store, [PLACED], T0)
        raise _RolledBack


def _assert_started_once_and_claimed(store: Store) -> None:
    started = [e for e in store.streams.load(TENANT_A, RUN) if e.type == ev.RUN_STARTED]
    assert len(started) == 1, f"{len(started)} RunStarted"
    row = store.conn.execute(
        "SELECT triggered_at FROM inbox WHERE tenant_id = %s AND event_id = %s",
        (TENANT_A, PLACED.id),
    ).fetchone()
    assert row is not None and row["triggered_at"] is not None
    (again,) = ingest_domain_events(store, [PLACED], T0, REGISTRY)
    assert not again.stored  # a redelivery starts nothing


def _explore(lab: Lab, first: Operation, second: Operation, check_run: Any) -> int:
    def check(store: Store, run: Run) -> None:
        check_run(run)
        _assert_started_once_and_claimed(store)

    return explore(lab, _nothing, first, second, check)


def test_two_deliveries_of_one_trigger_event_start_its_run_once(lab: Lab) -> None:
    def check(run: Run) -> None:
        assert run.errors == {}
        assert sorted(a.result for a in run.actors) == [False, True]  # one stored it

    assert _explore(lab, _deliver, _deliver, check) >= 4


def test_a_trigger_event_eventwakeup_stores_meanwhile_is_still_claimed_and_started(
    lab: Lab,
) -> None:
    seen: set[bool] = set()

    def check(run: Run) -> None:
        assert run.errors == {}
        assert run.actors[0].result is True  # the delivery claimed it, whoever stored it
        # Whether the wakeup stored it first, so the delivery claimed it by an update.
        seen.add("claim_inbox_trigger" in run.actors[0].labels)

    _explore(lab, _deliver, _wakeup, check)
    assert seen == {True, False}  # each stored it first in some order


def test_a_delivery_rolled_back_after_storing_leaves_the_event_to_the_other(lab: Lab) -> None:
    def check(run: Run) -> None:
        assert {n: type(e) for n, e in run.errors.items()} == {run.actors[0].name: _RolledBack}
        assert run.actors[1].result is True  # the other delivery stored it, and started it

    _explore(lab, _store_then_roll_back, _deliver, check)
