"""Completion policies of map and parallel: the pure arithmetic both share
(definition/completion.py), the builder's checks, and what is not shape."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_runner import (
    Completion,
    RetryPolicy,
    WorkflowDefinitionError,
    define_workflow,
    on_call,
    on_event,
)
from workflow_runner.definition.completion import (
    ItemOutcome,
    batch_result,
    decide,
    is_batch_result,
)
from workflow_runner.definition.shape import shape_of


def test_tolerated_failures_exactly_at_the_threshold_go_on() -> None:
    policy = Completion(tolerated_failures=1)
    assert decide(policy, total=5, succeeded=2, failed=1) is None
    assert decide(policy, total=5, succeeded=2, failed=2) == "failure_tolerance_exceeded"


def test_a_failure_percentage_exactly_at_the_threshold_goes_on() -> None:
    policy = Completion(tolerated_failure_pct=25)
    assert decide(policy, total=8, succeeded=0, failed=2) is None  # 25 % of 8
    assert decide(policy, total=8, succeeded=0, failed=3) == "failure_tolerance_exceeded"
    # Compared without rounding: 1 of 3 is 33.3 %, over a third's 33.3.
    assert decide(Completion(tolerated_failure_pct=33.3), 3, 0, 1) == "failure_tolerance_exceeded"
    assert decide(Completion(tolerated_failure_pct=0), 3, 1, 0) is None


def test_min_successful_ends_the_step_once_reached() -> None:
    policy = Completion(min_successful=2)
    assert decide(policy, total=5, succeeded=1, failed=1) is None
    assert decide(policy, total=5, succeeded=2, failed=1) == "min_successful_reached"


def test_min_successful_out_of_reach_is_a_tolerance_exceeded() -> None:
    policy = Completion(min_successful=3)
    assert decide(policy, total=4, succeeded=0, failed=1) is None  # 3 left, 3 needed
    assert decide(policy, total=4, succeeded=1, failed=2) == "failure_tolerance_exceeded"
    assert decide(policy, total=2, succeeded=0, failed=0) == "failure_tolerance_exceeded"


def test_the_tolerance_wins_when_one_count_brings_both() -> None:
    policy = Completion(min_successful=2, tolerated_failures=0)
    assert decide(policy, total=5, succeeded=2, failed=1) == "failure_tolerance_exceeded"


def test_every_item_settled_without_a_threshold_is_all_completed() -> None:
    assert decide(Completion(), total=3, succeeded=1, failed=2) == "all_completed"
    assert decide(Completion(), total=3, succeeded=1, failed=1) is None
    assert decide(Completion(), total=0, succeeded=0, failed=0) == "all_completed"
    # The last item reaching min_successful: it was reached, not merely all done.
    assert decide(Completion(min_successful=3), 3, 3, 0) == "min_successful_reached"


def test_the_batch_result_keeps_item_order_and_lists_failures() -> None:
    items = [
        ItemOutcome("succeeded", {"n": 1}),
        ItemOutcome("failed", reason="returned_failure", ref={"runId": "r-1"}),
        ItemOutcome("stopped"),
        ItemOutcome("succeeded", None),
    ]
    batch = batch_result(items, "min_successful_reached")
    assert batch == {
        "results": [{"n": 1}, None, None, None],
        "failures": [{"index": 1, "reason": "returned_failure", "runId": "r-1"}],
        "succeeded": 2,
        "failed": 1,
        "completion": "min_successful_reached",
    }
    assert is_batch_result(batch)
    assert not is_batch_result({"results": [], "completion": "done"})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_successful": 0},
        {"min_successful": True},
        {"tolerated_failures": -1},
        {"tolerated_failures": 1.5},
        {"tolerated_failure_pct": 101},
        {"tolerated_failure_pct": float("nan")},
        {"tolerated_failure_pct": "10"},
    ],
)
def test_a_policy_out_of_range_is_refused_when_defined(kwargs: dict[str, Any]) -> None:
    with pytest.raises(WorkflowDefinitionError, match="Completion: "):
        Completion(**kwargs)


def test_a_policy_round_trips_as_stored() -> None:
    policy = Completion(min_successful=2, tolerated_failures=1, tolerated_failure_pct=12.5)
    assert Completion.from_json(policy.to_json()) == policy
    assert Completion().to_json() == {}


def _mapper(completion: Completion | None, catch: bool = False) -> Any:
    return define_workflow(
        name="mapper",
        trigger=on_event("m.go"),
        steps=lambda s: [
            s.map([1, 2], workflow="kid", result_key="r", completion=completion, catch=catch),
            s.parallel(
                s.task("a", lambda ctx: 1, retry=RetryPolicy(max_attempts=2)),
                s.task("b", lambda ctx: 2),
                result_key="p",
                completion=completion,
            ),
        ],
        register=False,
    )


def test_a_completion_policy_is_a_value_not_shape() -> None:
    without = _mapper(None)
    one = _mapper(Completion(min_successful=1))
    two = _mapper(Completion(tolerated_failures=1, tolerated_failure_pct=50))
    assert len({without.fingerprint, one.fingerprint, two.fingerprint}) == 3
    assert shape_of(without) == shape_of(one) == shape_of(two)


def test_retry_policy_values_are_not_shape() -> None:
    def flow(policy: RetryPolicy) -> Any:
        return define_workflow(
            name="t",
            trigger=on_call(),
            steps=lambda s: [s.task("charge", lambda ctx: 1, retry=policy)],
            register=False,
        )

    plain = flow(RetryPolicy())
    tuned = flow(RetryPolicy(retry_on=(TimeoutError,), rate=3.0, at_most_once=True))
    assert plain.fingerprint != tuned.fingerprint
    assert shape_of(plain) == shape_of(tuned)


def test_parallel_catch_needs_a_completion_policy() -> None:
    with pytest.raises(WorkflowDefinitionError, match="catch=True needs completion"):
        define_workflow(
            name="p",
            trigger=on_call(),
            steps=lambda s: [s.parallel(s.task("a", lambda ctx: 1), catch=True)],
            register=False,
        )


def test_parallel_refuses_a_min_successful_beyond_its_tasks() -> None:
    with pytest.raises(WorkflowDefinitionError, match="needs 3 tasks to succeed, but it has 2"):
        define_workflow(
            name="p",
            trigger=on_call(),
            steps=lambda s: [
                s.parallel(
                    s.task("a", lambda ctx: 1),
                    s.task("b", lambda ctx: 2),
                    completion=Completion(min_successful=3),
                )
            ],
            register=False,
        )


def test_map_refuses_a_completion_that_is_no_policy() -> None:
    with pytest.raises(WorkflowDefinitionError, match="completion must be a Completion"):
        define_workflow(
            name="m",
            trigger=on_call(),
            steps=lambda s: [s.map([1], workflow="kid", completion={"min_successful": 1})],
            register=False,
        )
