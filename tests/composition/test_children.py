"""Child workflows and map on real PostgreSQL, through the SAM application's handlers
(the test kit): starts, joins, results, failures, cancellation, shared children."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from workflow_runner import Event, Steps, define_workflow, on_call, on_event, run_id_for
from workflow_runner import stream as ev
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.cancel import cancel_run
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A, TENANT_B

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]


def children() -> list[WorkflowDefinition]:
    """Child workflows: one that waits a minute and doubles, one that returns at once,
    one that fails for a bad item, one that waits a day and starts a grandchild."""
    return [
        define_workflow(
            name="double",
            trigger=on_call(),
            steps=lambda s: [
                s.wait(for_="PT1M"),
                s.return_(
                    lambda ctx: {
                        "n": ctx.event.payload["n"] * 2,
                        "parent": ctx.workflow.parent_run_id,
                    }
                ),
            ],
            register=False,
        ),
        define_workflow(
            name="instant",
            trigger=on_call(),
            steps=lambda s: [s.return_(lambda ctx: {"echo": ctx.event.payload})],
            register=False,
        ),
        define_workflow(
            name="picky",
            trigger=on_call(),
            steps=lambda s: [
                s.wait(for_="PT1M"),
                s.branch(
                    if_=lambda ctx: ctx.event.payload.get("bad"),
                    on_true=[s.return_({"isSuccess": False, "error": "bad item"})],
                    on_false=[s.return_({"ok": ctx_n()})],
                ),
            ],
            register=False,
        ),
        define_workflow(
            name="slow",
            trigger=on_call(),
            steps=lambda s: [
                s.call_workflow("slower", input={"depth": 2}),
                s.return_({"done": True}),
            ],
            register=False,
        ),
        define_workflow(
            name="slower",
            trigger=on_call(),
            steps=lambda s: [s.wait(for_="P1D"), s.return_({"late": True})],
            register=False,
        ),
    ]


def ctx_n() -> bool:
    return True


def parents() -> list[WorkflowDefinition]:
    def caller(name: str, child: str, catch: bool = False) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.call_workflow(
                    child,
                    input=Event.payload["input"],
                    key=Event.payload["key"],
                    result_key="child",
                    catch=catch,
                ),
                s.return_({"isSuccess": True, "child": Steps["child"]}),
            ],
            register=False,
        )

    def mapper(name: str, child: str, concurrency: int, catch: bool = False) -> WorkflowDefinition:
        return define_workflow(
            name=name,
            trigger=on_event(f"{name}.go"),
            idempotency_key=Event.payload["id"],
            steps=lambda s: [
                s.map(
                    Event.payload["items"],
                    workflow=child,
                    concurrency=concurrency,
                    result_key="results",
                    catch=catch,
                ),
                s.return_({"isSuccess": True, "results": Steps["results"]}),
            ],
            register=False,
        )

    starter = define_workflow(
        name="starter",
        trigger=on_event("starter.go"),
        idempotency_key=Event.payload["id"],
        steps=lambda s: [
            s.start_workflow("double", input={"n": 5}, key=Event.payload["id"]),
            s.return_({"isSuccess": True}),
        ],
        register=False,
    )
    return [
        caller("call-double", "double"),
        caller("call-instant", "instant"),
        caller("call-picky", "picky"),
        caller("call-picky-catch", "picky", catch=True),
        caller("call-slow", "slow"),
        caller("call-nobody", "no-such-workflow"),
        mapper("map-double", "double", concurrency=2),
        mapper("map-picky", "picky", concurrency=2),
        mapper("map-picky-one", "picky", concurrency=1),
        mapper("map-picky-catch", "picky", concurrency=10, catch=True),
        mapper("map-wide", "double", concurrency=25),
        starter,
    ]


@pytest.fixture
def env(make_env: MakeEnv) -> WorkflowTestEnv:
    return make_env(workflows=[*children(), *parents()], now=T0)


def go(env: WorkflowTestEnv, workflow: str, tenant: str = TENANT_A, **payload: object) -> None:
    env.put_event(tenant=tenant, type=f"{workflow}.go", payload=payload)


def status_of(env: WorkflowTestEnv, workflow: str, key: str) -> str:
    return env.run(tenant=TENANT_A, workflow=workflow, key=key).status


# --- call_workflow ---------------------------------------------------------------------


def test_call_workflow_waits_for_the_child_and_gets_its_result(env: WorkflowTestEnv) -> None:
    go(env, "call-double", id="c1", input={"n": 21}, key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-double", key="c1")
    child = env.run(tenant=TENANT_A, workflow="double", key="k1")
    assert (parent.status, child.status) == ("waiting", "waiting")
    assert child.events[0].payload["parentRunId"] == parent.run_id
    assert child.events[0].payload["triggerEventType"] == "workflow.call"
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="call-double", key="c1")
    assert parent.status == "completed"
    assert parent.result == {"isSuccess": True, "child": {"n": 42, "parent": parent.run_id}}
    assert parent.event_types == [
        ev.RUN_STARTED,
        ev.CHILDREN_WAITING,
        ev.CHILDREN_SETTLED,
        ev.STEP_RESUMED,
        ev.RUN_COMPLETED,
    ]
    assert parent.events[3].payload["resumedBy"] == "children"


def test_a_child_that_ends_in_its_first_pass_still_wakes_its_parent(env: WorkflowTestEnv) -> None:
    go(env, "call-instant", id="c1", input={"a": 1}, key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-instant", key="c1")
    assert parent.result == {"isSuccess": True, "child": {"echo": {"a": 1}}}


def test_a_failed_child_fails_its_parent_with_reason_child_failed(env: WorkflowTestEnv) -> None:
    go(env, "call-picky", id="c1", input={"bad": True}, key="k1")
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="call-picky", key="c1")
    assert (parent.status, parent.reason) == ("failed", "child_failed")
    assert parent.error == "workflow step failed (ChildFailed)"


def test_catch_hands_the_failed_child_to_the_next_step(env: WorkflowTestEnv) -> None:
    go(env, "call-picky-catch", id="c1", input={"bad": True}, key="k1")
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="call-picky-catch", key="c1")
    child = env.run(tenant=TENANT_A, workflow="picky", key="k1")
    assert parent.status == "completed"
    assert parent.steps["child"] == {
        "failed": True,
        "reason": "returned_failure",
        "runId": child.run_id,
    }


def test_an_unknown_child_workflow_fails_the_parent_not_the_worker(env: WorkflowTestEnv) -> None:
    go(env, "call-nobody", id="c1", input={}, key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-nobody", key="c1")
    assert (parent.status, parent.reason) == ("failed", "child_failed")
    settled = next(e for e in parent.events if e.type == ev.CHILDREN_SETTLED)
    assert settled.payload["reason"] == "child_workflow_unknown"


def test_two_parents_naming_the_same_child_key_share_one_child(env: WorkflowTestEnv) -> None:
    go(env, "call-double", id="c1", input={"n": 1}, key="shared")
    go(env, "call-double", id="c2", input={"n": 99}, key="shared")
    assert len(env.runs(tenant=TENANT_A, workflow="double")) == 1
    env.advance("PT1M")
    for key in ("c1", "c2"):
        parent = env.run(tenant=TENANT_A, workflow="call-double", key=key)
        assert parent.result["child"]["n"] == 2  # the first caller's input started it


def test_a_child_that_already_settled_is_counted_at_once(env: WorkflowTestEnv) -> None:
    go(env, "call-instant", id="c1", input={"a": 1}, key="shared")
    go(env, "call-instant", id="c2", input={"a": 2}, key="shared")
    later = env.run(tenant=TENANT_A, workflow="call-instant", key="c2")
    assert later.result == {"isSuccess": True, "child": {"echo": {"a": 1}}}


def test_children_stay_in_their_parents_tenant(env: WorkflowTestEnv) -> None:
    go(env, "call-double", id="c1", input={"n": 1}, key="k1")
    go(env, "call-double", TENANT_B, id="c1", input={"n": 2}, key="k1")
    env.advance("PT1M")
    a = env.run(tenant=TENANT_A, workflow="call-double", key="c1")
    b = env.run(tenant=TENANT_B, workflow="call-double", key="c1")
    assert (a.result["child"]["n"], b.result["child"]["n"]) == (2, 4)
    assert a.result["child"]["parent"] == a.run_id and b.result["child"]["parent"] == b.run_id


# --- start_workflow -----------------------------------------------------------------------


def test_start_workflow_goes_on_and_records_the_child(env: WorkflowTestEnv) -> None:
    go(env, "starter", id="s1")
    parent = env.run(tenant=TENANT_A, workflow="starter", key="s1")
    assert parent.status == "completed"
    assert parent.event_types == [ev.RUN_STARTED, ev.CHILDREN_REQUESTED, ev.RUN_COMPLETED]
    child = env.run(tenant=TENANT_A, workflow="double", key="s1")
    assert parent.events[1].payload["childRunIds"] == [child.run_id]
    env.advance("PT1M")
    assert env.run(tenant=TENANT_A, workflow="double", key="s1").status == "completed"


# --- map -----------------------------------------------------------------------------------


def test_map_keeps_to_its_concurrency_and_returns_results_in_item_order(
    env: WorkflowTestEnv,
) -> None:
    go(env, "map-double", id="m1", items=[{"n": n} for n in range(5)])
    for minute in range(3):
        kids = env.runs(tenant=TENANT_A, workflow="double")
        assert sum(1 for k in kids if k.status == "waiting") <= 2, minute
        assert len(kids) == min(5, 2 * (minute + 1))
        env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="map-double", key="m1")
    assert parent.status == "completed"
    assert [r["n"] for r in parent.result["results"]] == [0, 2, 4, 6, 8]


def test_map_items_that_are_not_objects_arrive_wrapped(env: WorkflowTestEnv) -> None:
    env.put_event(
        tenant=TENANT_A,
        type="map-picky-catch.go",
        payload={"id": "m1", "items": [7, "x"]},
    )
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="map-picky-catch", key="m1")
    assert parent.result["results"] == [{"ok": True}, {"ok": True}]
    inputs = [k.events[0] for k in env.runs(tenant=TENANT_A, workflow="picky")]
    assert len(inputs) == 2


def test_map_over_nothing_goes_on_with_an_empty_list(env: WorkflowTestEnv) -> None:
    go(env, "map-double", id="m1", items=[])
    parent = env.run(tenant=TENANT_A, workflow="map-double", key="m1")
    assert (parent.status, parent.result) == ("completed", {"isSuccess": True, "results": []})


def test_a_failed_item_fails_the_map_at_once_and_cancels_the_rest(env: WorkflowTestEnv) -> None:
    items = [{"bad": False}, {"bad": True}, {"bad": False}, {"bad": False}]
    go(env, "map-picky", id="m1", items=items)
    env.advance("PT1M")  # items 0 and 1 end: 1 failed
    parent = env.run(tenant=TENANT_A, workflow="map-picky", key="m1")
    assert (parent.status, parent.reason) == ("failed", "child_failed")
    kids = {
        k.events[0].payload["idempotencyKey"]: k
        for k in env.runs(tenant=TENANT_A, workflow="picky")
    }
    statuses = sorted(k.status for k in kids.values())
    # Items 0 and 1 were counted together: the failure frees no slot, 2 and 3 never start.
    assert statuses == ["completed", "failed"]
    env.advance("PT10M")
    assert env.run(tenant=TENANT_A, workflow="map-picky", key="m1").status == "failed"
    assert len(env.runs(tenant=TENANT_A, workflow="picky")) == 2


def test_a_map_that_failed_starts_no_further_child(env: WorkflowTestEnv) -> None:
    go(env, "map-picky-one", id="m1", items=[{"bad": True}, {"bad": False}])
    env.advance("PT1M")  # item 0 fails
    parent = env.run(tenant=TENANT_A, workflow="map-picky-one", key="m1")
    assert (parent.status, parent.reason) == ("failed", "child_failed")
    env.advance("PT10M")
    [only] = env.runs(tenant=TENANT_A, workflow="picky")  # item 1 never started
    assert only.status == "failed"


def test_map_with_catch_puts_each_failure_in_its_slot(env: WorkflowTestEnv) -> None:
    items = [{"bad": False}, {"bad": True}, {"bad": False}]
    go(env, "map-picky-catch", id="m1", items=items)
    env.advance("PT1M")
    parent = env.run(tenant=TENANT_A, workflow="map-picky-catch", key="m1")
    assert parent.status == "completed"
    first, failed, last = parent.result["results"]
    assert first == last == {"ok": True}
    assert failed["failed"] is True and failed["reason"] == "returned_failure"
    assert env.run(tenant=TENANT_A, workflow="picky", run_id=failed["runId"]).status == "failed"


def test_a_wide_map_starts_children_across_several_worker_transactions(
    env: WorkflowTestEnv,
) -> None:
    go(env, "map-wide", id="m1", items=[{"n": n} for n in range(120)])
    assert len(env.runs(tenant=TENANT_A, workflow="double")) == 25
    env.advance("PT6M")
    parent = env.run(tenant=TENANT_A, workflow="map-wide", key="m1")
    assert parent.status == "completed"
    assert [r["n"] for r in parent.result["results"]] == [2 * n for n in range(120)]


# --- cancellation ----------------------------------------------------------------------


def test_cancelling_a_parent_cancels_its_children_and_theirs(env: WorkflowTestEnv) -> None:
    go(env, "call-slow", id="c1", input={}, key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-slow", key="c1")
    child = env.run(tenant=TENANT_A, workflow="slow", key="k1")
    [grandchild] = env.runs(tenant=TENANT_A, workflow="slower")
    assert (parent.status, child.status, grandchild.status) == ("waiting",) * 3
    cancel_run(env.store, TENANT_A, parent.run_id, env.now, "no longer needed")
    env.runtime.catch_up()
    for workflow, run_id in (
        ("call-slow", parent.run_id),
        ("slow", child.run_id),
        ("slower", grandchild.run_id),
    ):
        assert env.run(tenant=TENANT_A, workflow=workflow, run_id=run_id).status == "cancelled"
    env.advance("P2D")
    assert env.run(tenant=TENANT_A, workflow="slower", run_id=grandchild.run_id).status == (
        "cancelled"
    )


def test_a_started_child_outlives_its_parent(env: WorkflowTestEnv) -> None:
    go(env, "starter", id="s1")
    env.advance("PT1M")
    assert env.run(tenant=TENANT_A, workflow="double", key="s1").status == "completed"


def test_the_child_run_id_derives_from_its_workflow_and_key(env: WorkflowTestEnv) -> None:
    go(env, "call-double", id="c1", input={"n": 1}, key="k1")
    parent = env.run(tenant=TENANT_A, workflow="call-double", key="c1")
    assert parent.events[1].payload["childRunId"] == run_id_for("double", "k1")
