"""priority= on real PostgreSQL and in the test kit: held work of a limit's key is woken
by rank (queued time less the head start of its run's priority, then arrival), so a run
with a higher priority takes the next free slot before older work of lower priority."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from workflow_runner import Concurrency, Event, Steps, define_workflow, on_event
from workflow_runner.engine.task_outcomes import record_success as _record_success
from workflow_runner.errors import WorkflowDefinitionError
from workflow_runner.store import Store
from workflow_runner.testing import WorkflowTestEnv

from tests.flow.flows import at, claim, look, put, run_of, waiters
from tests.support import TENANT_A

MakeEnv = Callable[..., WorkflowTestEnv]


def test_a_freed_slot_wakes_the_higher_priority_before_older_work(store: Store) -> None:
    # Given: account a-1's one slot taken by run 1; run 2 (priority 0) queued before
    # run 3 (priority 600), and run 4 (priority -600) after them
    put(store, "prio-call", 1, now=at(0), prio=0)
    first = claim(store, at(1))
    assert first is not None and first.run_id == run_of("prio-call", 1)
    for n, prio in ((2, 0), (3, 600), (4, -600)):
        put(store, "prio-call", n, now=at(n), prio=prio)
        assert claim(store, at(n)) is None  # held: queued for the slot
    assert {w["run_id"] for w in waiters(store)} == {run_of("prio-call", n) for n in (2, 3, 4)}

    # When: run 1's attempt ends (its slot given back) and the key is looked at
    _record_success(store, first, 1, at(10))
    look(store, at(10))

    # Then: run 3 is woken and claims the slot; then run 2, then run 4
    order = []
    for step in range(3):
        now = at(11 + step)
        task = claim(store, now)
        assert task is not None
        order.append(task.run_id)
        _record_success(store, task, 1, now)
        look(store, now)
    assert order == [run_of("prio-call", n) for n in (3, 2, 4)]


def test_an_unreadable_priority_counts_as_none(store: Store) -> None:
    put(store, "prio-call", 1, now=at(0), prio=0)
    first = claim(store, at(1))
    assert first is not None
    put(store, "prio-call", 2, now=at(2), prio="high")  # not an integer: priority 0
    put(store, "prio-call", 3, now=at(3), prio=99999)  # clamped to 600
    for n in (2, 3):
        assert claim(store, at(n)) is None
    _record_success(store, first, 1, at(10))
    look(store, at(10))
    task = claim(store, at(11))
    assert task is not None and task.run_id == run_of("prio-call", 3)


@pytest.mark.parametrize("bad", [601, -601, True, "PT1M"])
def test_a_priority_out_of_range_or_not_an_integer_is_a_definition_error(bad: Any) -> None:
    with pytest.raises(WorkflowDefinitionError, match="priority"):
        define_workflow(
            name="bad-priority",
            trigger=on_event("x.go"),
            priority=bad,
            steps=lambda s: [s.return_({})],
            register=False,
        )


CALLS: list[int] = []


def _work(ctx: Any) -> Any:
    CALLS.append(ctx.event.payload["n"])
    return ctx.event.payload["n"]


def test_the_test_kit_runs_the_urgent_run_first_when_runs_queue_for_a_slot(
    make_env: MakeEnv,
) -> None:
    flow = define_workflow(
        name="export",
        trigger=on_event("export.requested"),
        idempotency_key=Event.payload["n"],
        concurrency=Concurrency(1, key=Event.payload["account"]),
        priority=Event.payload["prio"],
        steps=lambda s: [
            s.wait(for_="PT1M"),
            s.task("render", _work),
            s.return_({"n": Steps["render"]}),
        ],
        register=False,
    )
    env = make_env(workflows=[flow])
    CALLS.clear()
    for n, prio in ((1, 0), (2, 0), (3, 0), (4, 300)):
        env.put_event(
            tenant=TENANT_A,
            type="export.requested",
            payload={"n": n, "account": "a", "prio": prio},
        )
    env.advance("PT5M")
    runs = env.runs(tenant=TENANT_A, workflow="export")
    assert {r.status for r in runs} == {"completed"}

    # Every run queued for the one slot: the urgent one (4) ran before the older 2 and 3
    assert len(CALLS) == 4 and CALLS.index(4) < CALLS.index(2) < CALLS.index(3)
