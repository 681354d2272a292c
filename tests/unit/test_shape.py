"""A definition's shape, and where a run's position tells a new shape apart from the one
it started on (definition/shape.py; issue 32)."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_runner import Event, RetryPolicy, Steps, define_workflow, on_call, on_cron, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.definition.shape import first_difference, shape_hash, shape_of
from workflow_runner.match import eq


def flow(steps: Any, **kwargs: Any) -> WorkflowDefinition:
    options: dict[str, Any] = {"trigger": on_event("t.go"), "awaits": {"paid": "order.paid"}}
    options.update(kwargs)
    return define_workflow(name="shaped", steps=steps, register=False, **options)


def noisy(subject: str, url: str, duration: str, attempts: int, fn: Any) -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.mail_send(to="a@example.com", subject=subject, body=lambda ctx: subject),
            s.webhook_send(url=url, body={"x": Event.payload["id"]}),
            s.wait(for_=duration),
            s.task("charge", fn, retry=RetryPolicy(max_attempts=attempts)),
            s.wait_for_event("paid", match=eq("id", Event.payload["id"]), timeout=duration),
            s.return_({"charge": Steps["charge"]}),
        ]
    )


def test_values_and_code_are_not_shape() -> None:
    one = noisy("Hi", "https://a.example.com/x", "P1D", 3, lambda ctx: 1)
    two = noisy("Hello", "https://b.example.com/y", "P2D", 5, lambda ctx: 2)
    assert one.fingerprint != two.fingerprint
    assert shape_of(one) == shape_of(two)
    assert shape_hash(shape_of(one)) == shape_hash(shape_of(two))


def test_keys_awaited_types_tasks_children_and_the_trigger_are_shape() -> None:
    base = shape_of(flow(lambda s: [s.task("charge", lambda c: 1), s.return_()]))
    for other in (
        flow(lambda s: [s.task("bill", lambda c: 1), s.return_()]),
        flow(lambda s: [s.task("charge", lambda c: 1), s.return_()], trigger=on_event("u.go")),
        flow(lambda s: [s.task("charge", lambda c: 1), s.return_()], trigger=on_cron("@daily")),
        flow(lambda s: [s.call_workflow("kid", result_key="k"), s.return_()]),
    ):
        assert shape_of(other) != base
    waits = [
        shape_of(flow(lambda s: [s.wait_for_event("paid", timeout="P1D")], awaits=awaits))
        for awaits in ({"paid": "order.paid"}, {"paid": "invoice.paid"})
    ]
    assert waits[0] != waits[1]  # the awaited type behind the name
    assert waits[0] == shape_of(
        flow(
            lambda s: [s.wait_for_event("paid", timeout="P1D")],
            awaits={"paid": "order.paid", "refunded": "order.refunded"},
        )
    )
    assert shape_of(flow(lambda s: [s.return_()], trigger=on_call()))["trigger"] == {"kind": "call"}


NESTED = lambda s: [  # noqa: E731 - a step list shared by the cases below
    s.compute("a", lambda c: 1),
    s.branch(
        if_=lambda ctx: True,
        on_true=[s.compute("b", lambda c: 2), s.wait(for_="P1D"), s.compute("c", lambda c: 3)],
        on_false=[s.wait(for_="P2D")],
    ),
    s.for_each(
        Event.payload["items"],
        as_="item",
        do=[s.compute("d", lambda c: 4), s.wait(for_="PT1H")],
    ),
    s.retry(times=3, do=[s.compute("e", lambda c: 5), s.wait(for_="PT1M")]),
    s.parallel(s.task("p", lambda c: 1), s.task("q", lambda c: 2), result_key="pq"),
    s.return_(),
]
IN_ARM = [{"i": 1, "arm": "true"}, {"i": 1}]
IN_ITEM = [{"i": 2, "item": 3}, {"i": 1}]
IN_ATTEMPT = [{"i": 3, "attempt": 2}, {"i": 1}]
AT_RETRY = [{"i": 3, "attempt": 2}]
AT_PARALLEL = [{"i": 4}]
PARALLEL_TASK = [{"i": 4}, {"i": 1}]


def shape(steps: Any) -> dict[str, Any]:
    return shape_of(flow(steps))


@pytest.mark.parametrize("path", [IN_ARM, IN_ITEM, IN_ATTEMPT, AT_RETRY, AT_PARALLEL])
def test_the_same_shape_agrees_everywhere(path: list[dict[str, Any]]) -> None:
    assert first_difference(shape(NESTED), shape(NESTED), path) is None


def edited(**changes: Any) -> Any:
    def steps(s: Any) -> list[Any]:
        built = NESTED(s)
        for index, step in changes.items():
            built[int(index.removeprefix("i"))] = step(s)
        return built

    return steps


@pytest.mark.parametrize(
    ("path", "edit", "difference"),
    [
        # Before the position at the top: the result key the run recorded.
        (IN_ARM, {"i0": lambda s: s.compute("z", lambda c: 1)}, "step 0 (compute): key 'a' → 'z'"),
        # Before the position inside the arm it is in.
        (
            IN_ARM,
            {
                "i1": lambda s: s.branch(
                    if_=lambda ctx: True,
                    on_true=[s.compute("bb", lambda c: 2), s.wait(for_="P1D")],
                    on_false=[s.wait(for_="P2D")],
                )
            },
            "step 1 (branch) › on_true › step 0 (compute): key 'b' → 'bb'",
        ),
        # The container it is in became another kind.
        (
            IN_ITEM,
            {
                "i2": lambda s: s.retry(
                    times=2, do=[s.compute("d", lambda c: 4), s.wait(for_="PT1H")]
                )
            },
            "step 2 (for_each): for_each → retry",
        ),
        # The step it waits at is another kind.
        (
            IN_ATTEMPT,
            {
                "i3": lambda s: s.retry(
                    times=3, do=[s.compute("e", lambda c: 5), s.task("w", lambda c: 1)]
                )
            },
            "step 3 (retry) › attempt 2 › step 1 (wait): wait → task",
        ),
        # The parallel it waits at lost a task.
        (
            AT_PARALLEL,
            {"i4": lambda s: s.parallel(s.task("p", lambda c: 1), result_key="pq")},
            "step 4 (parallel): the steps inside (steps) changed",
        ),
    ],
)
def test_a_difference_where_the_run_has_been_or_stands_is_named_by_its_path(
    path: list[dict[str, Any]], edit: dict[str, Any], difference: str
) -> None:
    assert first_difference(shape(NESTED), shape(edited(**edit)), path) == difference


@pytest.mark.parametrize(
    ("path", "edit"),
    [
        # After the position: the new code's.
        (IN_ARM, {"i5": lambda s: s.compute("tail", lambda c: 9)}),
        (IN_ARM, {"i2": lambda s: s.wait(for_="P9D")}),
        # The other arm, which this run is not in.
        (
            IN_ARM,
            {
                "i1": lambda s: s.branch(
                    if_=lambda ctx: True,
                    on_true=[
                        s.compute("b", lambda c: 2),
                        s.wait(for_="P1D"),
                        s.compute("c", lambda c: 3),
                    ],
                    on_false=[s.compute("other", lambda c: 0)],
                )
            },
        ),
        # A retry it waits to re-enter: its next attempt runs the new steps inside.
        (AT_RETRY, {"i3": lambda s: s.retry(times=5, do=[s.compute("f", lambda c: 6)])}),
    ],
)
def test_a_change_after_the_position_or_elsewhere_agrees(
    path: list[dict[str, Any]], edit: dict[str, Any]
) -> None:
    assert first_difference(shape(NESTED), shape(edited(**edit)), path) is None


def test_a_task_of_a_parallel_is_found_by_its_path() -> None:
    fewer = edited(i4=lambda s: s.parallel(s.task("p", lambda c: 1), result_key="pq"))
    assert first_difference(shape(NESTED), shape(fewer), PARALLEL_TASK) == (
        "step 4 (parallel) › step 1 (task): removed"
    )
    renamed_other = edited(
        i4=lambda s: s.parallel(s.task("p", lambda c: 1), s.task("q", lambda c: 7), result_key="pq")
    )
    assert first_difference(shape(NESTED), shape(renamed_other), PARALLEL_TASK) is None


def test_a_changed_trigger_is_a_difference_wherever_the_run_is() -> None:
    other = shape_of(flow(NESTED, trigger=on_event("t.began")))
    assert first_difference(shape(NESTED), other, IN_ARM) == (
        "the trigger changed (on_event('t.go') → on_event('t.began'))"
    )
