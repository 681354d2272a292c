"""s.parallel(branches=[...]) at definition time: what the builder refuses (naming the
place), the shape of the new form, the old form's fingerprint and shape untouched, and
the internal workflows its branches run as (definition/branches.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from workflow_runner import (
    Completion,
    DomainEvent,
    WorkflowDefinitionError,
    define_workflow,
    on_event,
)
from workflow_runner.definition import WorkflowRegistry
from workflow_runner.definition.branches import (
    branch_context,
    branch_definitions,
    branch_input,
    family_member,
    shown_child,
)
from workflow_runner.definition.fingerprint import _describe
from workflow_runner.definition.shape import first_difference, shape_of


def flow(steps: Any, name: str = "quotes", **kwargs: Any) -> Any:
    return define_workflow(
        name=name, trigger=on_event("t.go"), steps=steps, register=False, **kwargs
    )


def refused(steps: Any) -> str:
    with pytest.raises(WorkflowDefinitionError) as error:
        flow(steps)
    return str(error.value)


def one(s: Any, key: str = "x") -> Any:
    return s.compute(key, lambda ctx: 1)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_max_concurrency_below_one_is_a_definition_error_naming_its_place(bad: Any) -> None:
    message = refused(lambda s: [one(s, "a"), s.parallel(branches=[[one(s)]], max_concurrency=bad)])
    assert message.startswith("quotes › step 1 (parallel)")
    assert f"max_concurrency must be an integer from 1 to 10000, not {bad!r}" in message


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            lambda s: [s.parallel(s.task("t", lambda c: 1), branches=[[one(s)]])],
            "quotes › step 0 (parallel): give tasks as arguments or branches=[[...], ...], "
            "not both",
        ),
        (
            lambda s: [s.parallel(branches=[[]])],
            "quotes › step 0 (parallel): branches[0] has no steps",
        ),
        (
            lambda s: [s.parallel(branches="ab")],
            "quotes › step 0 (parallel): branches must be a list of step lists",
        ),
        (
            lambda s: [s.parallel(branches=[[one(s), "x"]])],
            "quotes › step 0 (parallel): branches[0][1] is not a step (got str)",
        ),
        (
            lambda s: [s.parallel(s.task("t", lambda c: 1), max_concurrency=2)],
            "quotes › step 0 (parallel): max_concurrency applies to branches=[...]",
        ),
        (
            lambda s: [s.parallel(branches=[[one(s)]], completion=Completion(min_successful=2))],
            "quotes › step 0 (parallel): completion needs 2 branches to succeed, but it has 1",
        ),
        (
            lambda s: [s.parallel(branches=[[one(s), s.return_(1)]])],
            "quotes › step 0 (parallel) › branch 0 › step 1 (return): return_ inside a "
            "parallel's branch would end only the branch; use s.branch_result(value)",
        ),
        (
            lambda s: [one(s), s.branch_result(1)],
            "quotes › step 1 (branch_result): branch_result belongs inside "
            "s.parallel(branches=[...])",
        ),
        (
            lambda s: [s.parallel(branches=[[one(s)], [s.wait(for_="soon")]])],
            'quotes › step 0 (parallel) › branch 1 › step 0 (wait) › for_: Invalid duration "soon"',
        ),
    ],
)
def test_the_builder_refuses_with_the_place(steps: Any, expected: str) -> None:
    assert refused(steps).startswith(expected)


def test_branches_may_reuse_a_key_but_one_branch_may_not_twice() -> None:
    flow(lambda s: [s.parallel(branches=[[one(s)], [one(s)]])])  # separate child runs
    message = refused(lambda s: [s.parallel(branches=[[one(s), one(s)]])])
    assert "branch 0 › step 1 (compute): result key 'x' is already written" in message


def test_branch_names_are_reserved() -> None:
    with pytest.raises(WorkflowDefinitionError, match="reserved"):
        flow(lambda s: [one(s)], name="quotes/1/branch-0")


def test_the_empty_parallel_is_a_definition() -> None:
    definition = flow(lambda s: [s.parallel(result_key="none")])
    [parallel] = definition.steps
    assert parallel.branches == () and parallel.steps == ()


# --- shape and fingerprint ------------------------------------------------------------


def branched(label: str = "a", wait: str = "PT1H", key: str = "x") -> Any:
    return flow(
        lambda s: [
            s.parallel(
                branches=[
                    [s.wait(for_=wait), s.task(key, lambda c: label)],
                    [s.retry(2, [s.compute("y", lambda c: label)])],
                ],
                result_key="r",
                max_concurrency=1,
            )
        ]
    )


def test_the_branches_step_trees_are_shape_their_values_are_not() -> None:
    [step] = shape_of(branched())["steps"]
    assert step == {
        "kind": "parallel",
        "resultKey": "r",
        "steps": [],
        "branches": [
            [{"kind": "wait"}, {"kind": "task", "key": "x"}],
            [{"kind": "retry", "do": [{"kind": "compute", "key": "y"}]}],
        ],
    }
    assert shape_of(branched("b", "PT2H")) == shape_of(branched())  # literals, code
    assert shape_of(branched(key="z")) != shape_of(branched())  # a key inside a branch
    difference = first_difference(shape_of(branched()), shape_of(branched(key="z")), [{"i": 0}])
    assert difference == "step 0 (parallel): the steps inside (branches) changed"


def test_the_task_form_keeps_its_shape_and_fingerprint_document() -> None:
    definition = flow(lambda s: [s.parallel(s.task("p", lambda c: 1), result_key="pq")])
    [step] = shape_of(definition)["steps"]
    assert step == {"kind": "parallel", "resultKey": "pq", "steps": [{"kind": "task", "key": "p"}]}
    described = _describe(definition.steps[0])
    assert set(described) == {"steps", "result_key", "kind"}  # no branches, no max_concurrency


def test_a_changed_branch_changes_the_fingerprint() -> None:
    assert branched(wait="PT1H").fingerprint != branched(wait="PT2H").fingerprint


# --- the internal workflows -------------------------------------------------------------


def test_each_branch_is_an_internal_workflow_of_the_parents_version() -> None:
    parent = define_workflow(
        name="quotes",
        trigger=on_event("t.go"),
        version=3,
        pinning="exact",
        steps=lambda s: [
            s.branch(
                lambda c: True,
                [
                    s.parallel(
                        branches=[
                            [one(s)],
                            [s.parallel(branches=[[one(s, "deep")]], result_key="inner")],
                        ]
                    )
                ],
            )
        ],
        register=False,
    )
    made = branch_definitions(parent)
    assert [d.name for d in made] == [
        "quotes/0.true.0/branch-0",
        "quotes/0.true.0/branch-1",
        "quotes/0.true.0/branch-1/0/branch-0",
    ]
    assert {(d.version, d.pinning, d.trigger.kind) for d in made} == {(3, "exact", "call")}
    assert [d.branch_of.result_key for d in made] == ["x", "inner", "deep"]
    registry = WorkflowRegistry()
    registry.register(parent)
    assert registry.names() == ["quotes"]  # the branches are not workflows of their own
    assert registry.version("quotes/0.true.0/branch-1", 3) == made[1]
    other = branch_definitions(branched())  # another parent: other fingerprints
    assert made[0].fingerprint != other[0].fingerprint


def test_a_join_family_names_each_branch_and_shows_it() -> None:
    assert family_member("quotes/2/branch-*@v4", 1) == ("quotes/2/branch-1", 4)
    assert family_member("price", 1) is None
    assert shown_child("quotes/2/branch-*@v4", 1, "map") == ("quotes/2/branch-1", "parallel")
    assert shown_child("price", 0, "map") == ("price", "map")


def test_a_branch_sees_its_parents_event_and_results_under_its_own() -> None:
    at = datetime(2030, 1, 1, 9, tzinfo=UTC)
    parent = DomainEvent("e1", "order.placed", {"id": "o1"}, "tenant", at, "shop")
    carried = branch_input(parent, {"weight": 3, "x": "parent's"})
    trigger = DomainEvent("c1", "workflow.call", carried, "tenant", at, "workflow-runner")
    event, steps = branch_context(trigger, {"x": "branch's"})
    assert event == parent
    assert steps == {"weight": 3, "x": "branch's"}
