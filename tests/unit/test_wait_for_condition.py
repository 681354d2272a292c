"""wait_for_condition without a database: the builder's checks (each bad timing value is
a definition error naming its place and argument), the shape and graph of the step,
the delays between checks, the interpreter's check/checkpoint/resume, and the fact's
stored format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import Continue, DomainEvent, Done, define_workflow, on_event
from workflow_runner.definition.checks import DefinitionProblems
from workflow_runner.definition.conditions import condition_delay
from workflow_runner.definition.dsl import WorkflowDefinition
from workflow_runner.definition.fingerprint import compute_fingerprint
from workflow_runner.definition.shape import first_difference, shape_of
from workflow_runner.engine.step_kinds import refusal
from workflow_runner.graph import flowchart
from workflow_runner.graph_render import to_mermaid
from workflow_runner.interpreter import Interpreter
from workflow_runner.pass_result import ResumedCondition
from workflow_runner.stream import StepWaitingForCondition, decode

NOW = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
EVENT = DomainEvent(id="e1", type="job.submitted", payload={"jobId": "j-1"}, tenant_id="t")


def _wf(steps: Any) -> WorkflowDefinition:
    return define_workflow(
        name="poller", trigger=on_event("job.submitted"), steps=steps, register=False
    )


def _problems(steps: Any) -> list[str]:
    with pytest.raises(DefinitionProblems) as raised:
        _wf(steps)
    return [str(p) for p in raised.value.problems]


def _check(ctx: Any, state: Any) -> Any:
    return Done(state) if state >= 3 else Continue(state + 1)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"every": "soon"},
            "poller › step 1 (wait_for_condition) › every: 'soon' is not an ISO-8601 "
            "duration such as 'PT30S' or 'PT5M'",
        ),
        (
            {"every": 30},
            "poller › step 1 (wait_for_condition): every must be an ISO-8601 duration "
            "string such as 'PT30S', not 30",
        ),
        (
            {"every": "PT0S"},
            "poller › step 1 (wait_for_condition) › every: 'PT0S' must be longer than zero",
        ),
        (
            {"backoff": "linear"},
            "poller › step 1 (wait_for_condition) › backoff: 'linear' is not a backoff: give "
            "'fixed' or 'exponential'",
        ),
        (
            {"cap": "PT5M"},
            "poller › step 1 (wait_for_condition) › cap: 'PT5M' caps an exponential "
            "backoff only; give backoff='exponential' or drop cap",
        ),
        (
            {"backoff": "exponential", "cap": "5 minutes"},
            "poller › step 1 (wait_for_condition) › cap: '5 minutes' is not an ISO-8601 duration",
        ),
        (
            {"backoff": "exponential", "every": "PT1M", "cap": "PT30S"},
            "poller › step 1 (wait_for_condition) › cap: 'PT30S' is shorter than the "
            "first delay (every=)",
        ),
        (
            {"max_attempts": 0},
            "poller › step 1 (wait_for_condition): max_attempts must be an integer >= 1 or "
            "None, not 0",
        ),
        (
            {"timeout": "P1X"},
            "poller › step 1 (wait_for_condition) › timeout: 'P1X' is not an ISO-8601 duration",
        ),
        (
            {"catch": "yes"},
            "poller › step 1 (wait_for_condition): catch must be True or False",
        ),
        (
            {"initial": {"at": {1, 2}}},
            "poller › step 1 (wait_for_condition): the initial state is not JSON",
        ),
    ],
)
def test_bad_arguments_are_definition_errors_naming_the_place(
    kwargs: dict[str, Any], expected: str
) -> None:
    kwargs.setdefault("initial", 0)
    problems = _problems(
        lambda s: [s.compute("a", lambda ctx: 1), s.wait_for_condition("job", _check, **kwargs)]
    )
    assert len(problems) == 1
    assert problems[0].startswith(expected), problems[0]


def test_check_must_be_a_function_and_the_key_unique() -> None:
    problems = _problems(lambda s: [s.wait_for_condition("job", "not a function")])
    assert problems == [
        "poller › step 0 (wait_for_condition): check must be a function of ctx and the state "
        "returning Done(value) or Continue(new_state)"
    ]
    problems = _problems(
        lambda s: [s.compute("job", lambda ctx: 1), s.wait_for_condition("job", _check)]
    )
    assert "result key 'job' is already written by step 0 (compute)" in problems[0]


def test_the_shape_is_kind_and_key_and_the_timing_is_not_shape() -> None:
    fast = _wf(lambda s: [s.wait_for_condition("job", _check, every="PT10S")])
    slow = _wf(
        lambda s: [
            s.wait_for_condition(
                "job", _check, every="PT1M", backoff="exponential", cap="PT1H", max_attempts=9
            )
        ]
    )
    assert shape_of(fast)["steps"] == [{"kind": "wait_for_condition", "key": "job"}]
    assert first_difference(shape_of(fast), shape_of(slow), [{"i": 0}]) is None
    assert fast.fingerprint != slow.fingerprint  # the values still pin a run exactly
    other = _wf(lambda s: [s.wait_for_condition("done", _check)])
    assert first_difference(shape_of(fast), shape_of(other), [{"i": 0}]) == (
        "step 0 (wait_for_condition): key 'job' → 'done'"
    )
    assert compute_fingerprint(fast, None) == compute_fingerprint(fast, None)


def test_the_graph_draws_the_condition_as_a_loop() -> None:
    wf = _wf(
        lambda s: [
            s.wait_for_condition(
                "job", _check, every="PT1M", backoff="exponential", cap="PT10M", timeout="PT1H"
            )
        ]
    )
    chart = flowchart(wf)
    node = chart.node_for(((0, ""),))
    assert node is not None and node.shape == "hexagon"
    assert node.label == (
        "wait for condition → job, every from PT1M doubling to PT10M, timeout PT1H"
    )
    loops = [e for e in chart.edges if e.source == e.target == node.id]
    assert [(e.label, e.dotted) for e in loops] == [("not yet: wait, check again", True)]
    text = to_mermaid(chart)  # what `wfr graph` prints
    assert '    s0{{"wait for condition → job, every from PT1M doubling to PT10M' in text
    assert '    s0 -. "not yet: wait, check again" .-> s0' in text
    assert '    s0 -- "done" --> finish' in text


def test_delays_fixed_and_exponential_with_a_cap() -> None:
    assert [condition_delay("PT30S", "fixed", None, n) for n in (1, 2, 5)] == [
        timedelta(seconds=30)
    ] * 3
    assert [condition_delay("PT1M", "exponential", "PT5M", n) for n in range(1, 6)] == [
        timedelta(minutes=m) for m in (1, 2, 4, 5, 5)
    ]
    assert condition_delay("PT1S", "exponential", None, 500) == timedelta(seconds=2**40)


def _pass(wf: WorkflowDefinition, resumed: ResumedCondition | None = None, now: datetime = NOW):
    path = resumed.path if resumed else None
    return Interpreter(wf, EVENT, "run-1", now, resumed_condition=resumed).run(path)


def test_a_check_that_continues_suspends_at_a_checkpoint_and_the_resume_checks_again() -> None:
    seen: list[Any] = []

    def check(ctx: Any, state: Any) -> Any:
        seen.append(state)
        return Done({"ready": state["n"]}) if state["n"] == 2 else Continue({"n": state["n"] + 1})

    wf = _wf(
        lambda s: [
            s.wait_for_condition("job", check, initial={"n": 0}, every="PT30S"),
            s.compute("after", lambda ctx: ctx.steps["job"]),
        ]
    )
    first = _pass(wf)
    assert first.outcome == "suspended"
    wait = first.suspension
    assert (wait.kind, wait.path, wait.wake_at) == (
        "waiting-for-condition",
        [{"i": 0}],
        NOW + timedelta(seconds=30),
    )
    assert (wait.condition.attempts, wait.condition.state) == (1, {"n": 1})
    assert first.results_delta() == {}
    later = NOW + timedelta(seconds=30)
    resumed = ResumedCondition([{"i": 0}], 1, {"n": 1}, NOW)
    second = _pass(wf, resumed, later)
    assert second.suspension.condition.attempts == 2
    third = _pass(wf, ResumedCondition([{"i": 0}], 2, {"n": 2}, NOW), later)
    assert third.outcome == "completed"
    assert third.results == {"job": {"ready": 2}, "after": {"ready": 2}}
    assert seen == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_limits_and_failures_in_the_interpreter() -> None:
    def never(ctx: Any, state: Any) -> Any:
        return Continue(state)

    def boom(ctx: Any, state: Any) -> Any:
        raise ConnectionError("status endpoint down")

    def wrong(ctx: Any, state: Any) -> Any:
        return {"done": True}

    capped = _wf(lambda s: [s.wait_for_condition("job", never, max_attempts=1)])
    failed = _pass(capped)
    assert (failed.outcome, failed.reason) == ("failed", "condition_not_met")
    assert failed.error == "workflow step failed (ConditionNotMet)"
    raised = _pass(_wf(lambda s: [s.wait_for_condition("job", boom)]))
    assert (raised.outcome, raised.reason) == ("failed", "condition_check_failed")
    assert raised.error == "workflow step failed (ConnectionError)"
    assert "status endpoint down" in (raised.error_detail or "")
    other = _pass(_wf(lambda s: [s.wait_for_condition("job", wrong)]))
    assert other.reason == "condition_check_failed"
    assert "returned dict, not Done(...) or Continue(...)" in (other.error_detail or "")
    caught = _pass(_wf(lambda s: [s.wait_for_condition("job", boom, catch=True)]))
    assert caught.outcome == "completed"
    assert caught.results["job"] == {
        "failed": True,
        "reason": "condition_check_failed",
        "error": "ConnectionError",
        "attempts": 1,
    }
    # The timeout: the check after the deadline's instant gives up; before it, the wake
    # time is clamped to the deadline so that a last check runs then.
    timed = _wf(lambda s: [s.wait_for_condition("job", never, every="PT40M", timeout="PT1H")])
    first = _pass(timed)
    assert first.suspension.wake_at == NOW + timedelta(minutes=40)
    assert first.suspension.condition.deadline == NOW + timedelta(hours=1)
    at = NOW + timedelta(minutes=40)
    second = _pass(timed, ResumedCondition([{"i": 0}], 1, None, NOW), at)
    assert second.suspension.wake_at == NOW + timedelta(hours=1)
    last = _pass(timed, ResumedCondition([{"i": 0}], 2, None, NOW), NOW + timedelta(hours=1))
    assert (last.outcome, last.reason) == ("failed", "condition_not_met")


def test_a_check_that_raises_inside_a_retry_is_retried_by_it() -> None:
    def boom(ctx: Any, state: Any) -> Any:
        raise ValueError("no")

    wf = _wf(lambda s: [s.retry(2, [s.wait_for_condition("job", boom)], base="PT1M")])
    result = _pass(wf)
    assert result.suspension.kind == "retry-scheduled"


def test_the_fact_round_trips_and_reads_without_its_optional_fields() -> None:
    fact = StepWaitingForCondition(
        workflow_name="poller",
        trigger_event_type="job.submitted",
        step_index=0,
        path=[{"i": 0}],
        definition_fingerprint="f" * 64,
        results_delta={},
        awaited_refs_delta={},
        key="job",
        attempts=2,
        condition_state={"n": 2},
        wake_at=NOW + timedelta(minutes=2),
        first_check_at=NOW,
        max_attempts=5,
        timeout_at=NOW + timedelta(hours=1),
    )
    payload = fact.to_payload()
    assert payload["conditionState"] == {"n": 2}
    assert payload["wakeAt"] == "2030-01-01T09:02:00.000000Z"
    assert decode(StepWaitingForCondition.TYPE, payload) == fact
    bare = {k: v for k, v in payload.items() if k not in ("maxAttempts", "timeoutAt")}
    read = decode("workflow.condition.waiting", bare)
    assert isinstance(read, StepWaitingForCondition)
    assert (read.max_attempts, read.timeout_at, read.due_at) == (None, None, fact.wake_at)


def test_a_migration_moves_a_polling_run_only_to_a_condition_under_the_same_key() -> None:
    waiting = StepWaitingForCondition(
        workflow_name="poller",
        trigger_event_type="job.submitted",
        step_index=0,
        path=[{"i": 0}],
        definition_fingerprint="f",
        key="job",
        attempts=2,
        condition_state=2,
        wake_at=NOW,
        first_check_at=NOW,
    )
    target = _wf(
        lambda s: [
            s.wait_for_condition("other", _check),
            s.wait_for_condition("job", _check, every="PT5M"),
        ]
    )
    assert refusal(target, waiting, [{"i": 1}]) is None
    assert refusal(target, waiting, [{"i": 0}]) == (
        "v1 step 0 is a wait_for_condition under 'other'; the run waits at a "
        "wait_for_condition under 'job' (after check 2)"
    )
