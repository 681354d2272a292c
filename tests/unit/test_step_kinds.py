"""What a migration accepts as "the same kind of step" (engine/step_kinds.py): the place
must exist, the run's path must lead there, and the step must wait for the same thing
under the same keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from workflow_runner import define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.engine.step_kinds import refusal
from workflow_runner.stream import (
    ChildrenWaiting,
    Path,
    RetryScheduled,
    StepWaiting,
    SuspensionFact,
)

T = datetime(2030, 1, 1, tzinfo=UTC)
COMMON: dict[str, Any] = {
    "workflow_name": "w",
    "trigger_event_type": "go",
    "step_index": 0,
    "path": [],
    "definition_fingerprint": "f",
}


def definition(steps: Any) -> WorkflowDefinition:
    return define_workflow(name="w", version=2, trigger=on_event("go"), steps=steps, register=False)


def child(ctx: Any) -> Any:
    return ctx.event.payload


TARGET = definition(
    lambda s: [
        s.wait(for_="PT1H"),
        s.branch(
            lambda ctx: True,
            on_true=[s.wait(for_="PT1H")],
            on_false=[s.compute("x", lambda ctx: 1)],
        ),
        s.for_each(lambda ctx: [1, 2], as_="item", do=[s.wait(for_="PT1H")]),
        s.retry(times=3, do=[s.compute("y", lambda ctx: 1)]),
        s.map(lambda ctx: [1], workflow="kid", key=lambda ctx: "k", result_key="kids"),
        s.parallel(branches=[[s.wait(for_="PT1H")], [s.wait(for_="PT2H")]], result_key="both"),
    ]
)
WAITING = StepWaiting(**COMMON, wake_at=T)


@pytest.mark.parametrize(
    "path",
    [
        [{"i": 0}],
        [{"i": 1, "arm": "true"}, {"i": 0}],
        [{"i": 2, "item": 1}, {"i": 0}],
    ],
)
def test_a_wait_goes_on_at_a_wait_its_path_leads_to(path: Path) -> None:
    assert refusal(TARGET, WAITING, path) is None


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ([{"i": 9}], "v2 step 9 does not exist"),
        ([{"i": 1}, {"i": 0}], "v2 step 1 › step 0 does not exist"),  # a branch needs its arm
        ([{"i": 2, "arm": "true"}, {"i": 0}], "does not exist"),  # a for_each needs an item
        ([{"i": 1, "arm": "false"}, {"i": 0}], "v2 step 1 › on_false › step 0 is a compute"),
        ([{"i": 3, "attempt": 1}], "v2 step 3 › attempt 1 is a retry; the run waits at a wait"),
    ],
)
def test_a_wait_is_refused_where_there_is_none(path: Path, why: str) -> None:
    found = refusal(TARGET, WAITING, path)
    assert found is not None and why in found


def test_a_retry_waits_to_retry_a_retry_at_an_attempt_frame() -> None:
    retrying = RetryScheduled(**COMMON, wake_at=T, attempt=2, max_attempts=3, error="E")
    assert refusal(TARGET, retrying, [{"i": 3, "attempt": 2}]) is None
    assert refusal(TARGET, retrying, [{"i": 0}]) == (
        "v2 step 0 is a wait; the run waits at a retry (attempt 2 of 3 next)"
    )


def test_a_join_needs_the_same_child_workflow_and_result_key() -> None:
    def waiting(workflow: str, result_key: str) -> SuspensionFact:
        return ChildrenWaiting(
            **COMMON,
            join_id="j",
            join_kind="map",
            child_workflow=workflow,
            children=1,
            concurrency=1,
            result_key=result_key,
        )

    assert refusal(TARGET, waiting("kid", "kids"), [{"i": 4}]) is None
    assert refusal(TARGET, waiting("pup", "kids"), [{"i": 4}]) == (
        "v2 step 4 is a map of 'kid' under 'kids'; the run waits at a map of 'pup' under 'kids'"
    )
    assert refusal(TARGET, waiting("kid", "all"), [{"i": 4}]) is not None


def test_a_parallel_of_branches_needs_as_many_branches_at_the_same_place() -> None:
    def waiting(family: str, children: int = 2, result_key: str = "both") -> SuspensionFact:
        return ChildrenWaiting(
            **COMMON,
            join_id="j",
            join_kind="map",
            child_workflow=family,
            children=children,
            concurrency=children,
            result_key=result_key,
        )

    assert refusal(TARGET, waiting("w/5/branch-*@v1"), [{"i": 5}]) is None  # from v1
    assert refusal(TARGET, waiting("w/5/branch-*@v1", children=3), [{"i": 5}]) == (
        "v2 step 5 is a parallel of 2 branch(es) under 'both'; "
        "the run waits at a parallel of 3 branch(es) under 'both'"
    )
    assert refusal(TARGET, waiting("w/4/branch-*@v1"), [{"i": 5}]) is not None  # elsewhere
    assert refusal(TARGET, waiting("w/5/branch-*@v1", result_key="all"), [{"i": 5}]) is not None
    assert refusal(TARGET, waiting("w/5/branch-*@v1"), [{"i": 4}]) is not None  # a map
