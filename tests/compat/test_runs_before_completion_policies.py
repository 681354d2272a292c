"""Runs an earlier release left in flight, before completion policies and map item
indexes (issue 33): a map's join without a policy (the column it lacked is NULL), its
children's starts without `mapIndex` and its suspension without `completion` go on with
this release as they did: the catching map collects every child, and a child reads
`map_index` as None. (Each stored shape without its new fields is read back in
tests/unit/test_composition_facts.py.)"""

from __future__ import annotations

from datetime import timedelta

from workflow_runner import (
    Event,
    ManualClock,
    StepContext,
    Steps,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.engine.children import start_children
from workflow_runner.engine.joins import count_settled_children
from workflow_runner.store import Store

from tests.support import resume_due, stream, trigger


def where(ctx: StepContext) -> dict[str, object]:
    return {"n": ctx.event.payload["n"], "index": ctx.workflow.map_index}


def _registry() -> WorkflowRegistry:
    registry = WorkflowRegistry()
    registry.register(
        define_workflow(
            name="old-kid",
            trigger=on_call(),
            steps=lambda s: [s.wait(for_="PT1M"), s.return_(where)],
            register=False,
        )
    )
    registry.register(
        define_workflow(
            name="old-map",
            trigger=on_event("old.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.map(Event.payload["items"], workflow="old-kid", result_key="all", catch=True),
                s.return_(Steps["all"]),
            ],
            register=False,
        )
    )
    return registry


def _as_an_earlier_release_left_it(store: Store) -> None:
    """What this release adds to a run that the earlier one did not write: gone."""
    store.conn.execute("UPDATE wf_events SET payload = payload - 'mapIndex' - 'completion'")
    store.conn.execute("UPDATE run_joins SET completion = NULL")


def test_a_map_an_earlier_release_started_completes_as_before(
    store: Store, clock: ManualClock
) -> None:
    registry = _registry()
    items = [{"n": 1}, {"n": 2}]
    [started] = trigger(
        store, registry, "old.go", {"id": "m1", "items": items}, clock.now()
    ).started
    start_children(store, registry, clock.now())
    _as_an_earlier_release_left_it(store)

    later = clock.now() + timedelta(minutes=1)
    resume_due(store, registry, later)  # the children end
    count_settled_children(store, later)
    resume_due(store, registry, later)  # the parent goes on

    events = stream(store, started.run_id)
    assert events[-1].type == "workflow.run-completed"
    assert events[-1].payload["result"] == [{"n": 1, "index": None}, {"n": 2, "index": None}]
    assert "workflow.step.stopped" not in [e.type for e in events]
