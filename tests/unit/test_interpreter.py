"""The interpreter alone: where passes suspend, how they resume, what they record."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from workflow_runner import DomainEvent, define_workflow, on_event
from workflow_runner.definition.dsl import Retry, WorkflowDefinition
from workflow_runner.interpreter import (
    Interpreter,
    RetryWait,
    backoff_delay,
    describe_step_error,
)
from workflow_runner.step_paths import step_at

NOW = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
EVENT = DomainEvent(
    id="e1", type="demo.fired", payload={"items": ["a", "b", "c"], "n": 2}, tenant_id="t"
)


def _wf(steps: Any, awaits: dict[str, str] | None = None) -> WorkflowDefinition:
    return define_workflow(
        name="wf", trigger=on_event("demo.fired"), steps=steps, awaits=awaits, register=False
    )


def _run(wf: WorkflowDefinition, path: Any = None, results: Any = None, seed: str = "s") -> Any:
    return Interpreter(wf, EVENT, "run-1", NOW, results=results, dispatch_seed=seed).run(path)


def test_plain_steps_complete_and_record_results() -> None:
    wf = _wf(
        lambda s: [s.compute("a", lambda ctx: 1), s.compute("b", lambda ctx: ctx.steps["a"] + 1)]
    )
    result = _run(wf)
    assert result.outcome == "completed"
    assert result.results == {"a": 1, "b": 2}


def test_wait_inside_branch_suspends_with_a_nested_path_and_resumes_inside_the_arm() -> None:
    wf = _wf(
        lambda s: [
            s.compute("flag", lambda ctx: True),
            s.branch(
                if_=lambda ctx: ctx.steps["flag"],
                on_true=[s.wait(for_="PT1H"), s.compute("after", lambda ctx: "arm-continued")],
                on_false=[s.compute("wrong", lambda ctx: "no")],
            ),
            s.compute("end", lambda ctx: ctx.steps["after"]),
        ]
    )
    first = _run(wf)
    assert first.outcome == "suspended"
    assert first.suspension.path == [{"i": 1, "arm": "true"}, {"i": 0}]
    assert first.suspension.step_index == 1
    assert first.suspension.wake_at == NOW + timedelta(hours=1)
    resumed = _run(wf, first.suspension.path, results=first.results)
    assert resumed.outcome == "completed"
    assert resumed.results["after"] == "arm-continued"
    assert resumed.results["end"] == "arm-continued"
    assert "wrong" not in resumed.results


def test_resume_inside_branch_keeps_the_arm_taken_even_if_the_condition_changed() -> None:
    wf = _wf(
        lambda s: [
            s.branch(
                if_=lambda ctx: ctx.steps.get("flag", True),
                on_true=[s.wait(for_="PT1H"), s.compute("arm", lambda ctx: "true")],
                on_false=[s.compute("arm", lambda ctx: "false")],
            )
        ]
    )
    first = _run(wf)
    resumed = _run(wf, first.suspension.path, results={"flag": False})
    assert resumed.results["arm"] == "true"


def test_wait_inside_for_each_resumes_the_same_item_then_suspends_at_the_next() -> None:
    wf = _wf(
        lambda s: [
            s.for_each(
                over=lambda ctx: ctx.event.payload["items"],
                as_="item",
                do=[
                    s.compute("seen", lambda ctx: [*ctx.steps.get("seen", []), ctx.scope["item"]]),
                    s.wait(for_="PT1M"),
                ],
            ),
            s.return_({"isSuccess": True, "seen": "done"}),
        ]
    )
    first = _run(wf)
    assert first.suspension.path == [{"i": 0, "item": 0}, {"i": 1}]
    assert first.results["seen"] == ["a"]
    second = _run(wf, first.suspension.path, results=first.results)
    assert second.suspension.path == [{"i": 0, "item": 1}, {"i": 1}]
    assert second.results["seen"] == ["a", "b"]
    third = _run(wf, second.suspension.path, results=second.results)
    fourth = _run(wf, third.suspension.path, results=third.results)
    assert fourth.outcome == "completed"
    assert fourth.results["seen"] == ["a", "b", "c"]


def _flaky(fail_until: int) -> Any:
    def step(ctx: Any) -> int:
        if ctx.workflow.retry_attempt < fail_until:
            raise ConnectionError("partner said no to alice@example.com")
        return int(ctx.workflow.retry_attempt)

    return step


def test_retry_schedules_the_next_attempt_and_reenters_the_body_from_its_first_step() -> None:
    wf = _wf(
        lambda s: [
            s.retry(
                times=3,
                backoff="linear",
                base="PT10S",
                do=[
                    s.compute("tries", lambda ctx: ctx.steps.get("tries", 0) + 1),
                    s.compute("ok", _flaky(3)),
                ],
            )
        ]
    )
    first = _run(wf)
    assert first.suspension.kind == "retry-scheduled"
    assert first.suspension.path == [{"i": 0, "attempt": 2}]
    assert first.suspension.retry == RetryWait(
        attempt=1, max_attempts=3, error="workflow step failed (ConnectionError)"
    )
    assert first.suspension.wake_at == NOW + timedelta(seconds=10)
    second = _run(wf, first.suspension.path, results=first.results)
    assert second.suspension.retry is not None and second.suspension.retry.attempt == 2
    assert second.suspension.wake_at == NOW + timedelta(seconds=20)
    third = _run(wf, second.suspension.path, results=second.results)
    assert third.outcome == "completed"
    assert third.results["ok"] == 3
    assert third.results["tries"] == 3


def test_exhausted_retry_fails_the_run_with_generic_error_text() -> None:
    wf = _wf(lambda s: [s.retry(times=1, do=[s.compute("ok", _flaky(5))])])
    result = _run(wf)
    assert result.outcome == "failed"
    assert result.error == "workflow step failed (ConnectionError)"
    assert "alice@example.com" not in result.error
    assert "alice@example.com" in (result.error_detail or "")
    assert result.failed_path == [{"i": 0, "attempt": 1}, {"i": 0}]


def test_retry_attempt_does_not_leak_into_a_later_retry_step() -> None:
    wf = _wf(
        lambda s: [
            s.retry(times=3, do=[s.compute("first", _flaky(3))]),
            s.retry(times=3, do=[s.compute("second", lambda ctx: ctx.workflow.retry_attempt)]),
            s.compute("outside", lambda ctx: ctx.workflow.retry_attempt),
        ]
    )
    r1 = _run(wf)
    r2 = _run(wf, r1.suspension.path, results=r1.results)
    r3 = _run(wf, r2.suspension.path, results=r2.results)
    assert r3.outcome == "completed"
    assert r3.results == {"first": 3, "second": 1, "outside": 1}


def test_wait_inside_retry_body_keeps_the_attempt_across_the_suspension() -> None:
    wf = _wf(
        lambda s: [
            s.retry(
                times=3,
                do=[s.wait(for_="PT1M"), s.compute("ok", _flaky(2))],
            )
        ]
    )
    r1 = _run(wf)
    assert r1.suspension.path == [{"i": 0, "attempt": 1}, {"i": 0}]
    r2 = _run(wf, r1.suspension.path)
    assert r2.suspension.kind == "retry-scheduled"
    r3 = _run(wf, r2.suspension.path)
    assert r3.suspension.path == [{"i": 0, "attempt": 2}, {"i": 0}]
    r4 = _run(wf, r3.suspension.path)
    assert r4.outcome == "completed"
    assert r4.results["ok"] == 2


@pytest.mark.parametrize(
    ("backoff", "attempt", "expected"),
    [
        ("linear", 1, 5),
        ("linear", 3, 15),
        ("exponential", 1, 5),
        ("exponential", 4, 40),
        ("exponential", 10, 60),
        ("fixed", 7, 5),
    ],
)
def test_backoff_kinds_and_cap(backoff: Any, attempt: int, expected: int) -> None:
    step = Retry(times=20, backoff=backoff, base="PT5S", cap="PT1M", jitter="none", do=())
    assert backoff_delay(step, attempt, random.Random(1)) == timedelta(seconds=expected)


def test_full_jitter_stays_within_zero_and_the_capped_delay() -> None:
    step = Retry(times=20, backoff="exponential", base="PT10S", cap="PT2M", jitter="full", do=())
    rng = random.Random(7)
    delays = [backoff_delay(step, 6, rng).total_seconds() for _ in range(500)]
    assert all(0 <= d <= 120 for d in delays)
    assert min(delays) < 30 and max(delays) > 90  # really spread, not constant


def test_equal_jitter_keeps_at_least_half_the_delay() -> None:
    step = Retry(times=5, backoff="fixed", base="PT10S", cap="PT1H", jitter="equal", do=())
    rng = random.Random(3)
    delays = [backoff_delay(step, 1, rng).total_seconds() for _ in range(200)]
    assert all(5 <= d <= 10 for d in delays)


def test_return_failure_ends_the_run_as_failed_with_returned_failure() -> None:
    wf = _wf(
        lambda s: [
            s.return_({"isSuccess": False, "error": "declined"}),
            s.compute("x", lambda c: 1),
        ]
    )
    result = _run(wf)
    assert result.outcome == "failed"
    assert result.reason == "returned_failure"
    assert result.return_value == {"isSuccess": False, "error": "declined"}
    assert "x" not in result.results


def test_return_inside_branch_ends_the_run() -> None:
    wf = _wf(
        lambda s: [
            s.branch(if_=True, on_true=[s.return_({"isSuccess": True, "early": 1})]),
            s.compute("never", lambda c: 1),
        ]
    )
    result = _run(wf)
    assert result.outcome == "completed"
    assert result.return_value == {"isSuccess": True, "early": 1}
    assert "never" not in result.results


def test_a_throwing_step_fails_the_pass_with_its_class_name_only() -> None:
    wf = _wf(lambda s: [s.compute("boom", lambda ctx: 1 / 0)])
    result = _run(wf)
    assert result.outcome == "failed"
    assert result.error == "workflow step failed (ZeroDivisionError)"


def test_non_json_results_fail_the_step() -> None:
    wf = _wf(lambda s: [s.compute("obj", lambda ctx: object())])
    result = _run(wf)
    assert result.outcome == "failed"
    assert (result.error, result.reason) == (
        "workflow step failed (NotStorable)",
        "result_not_storable",
    )


@pytest.mark.parametrize(
    "value",
    [
        {"text": "nul \x00 inside"},
        ["a lone surrogate \ud800"],
        {"\x00key": 1},
        float("nan"),
        {"deep": [float("inf")]},
        "x" * (256 * 1024),
    ],
    ids=["nul", "surrogate", "nul-key", "nan", "infinity", "over-256-kb"],
)
def test_results_postgresql_cannot_store_fail_the_step_with_a_reason(value: Any) -> None:
    wf = _wf(lambda s: [s.compute("bad", lambda ctx: value)])
    result = _run(wf)
    assert (result.outcome, result.reason) == ("failed", "result_not_storable")
    assert result.error == "workflow step failed (NotStorable)"
    assert "bad" not in result.results


def test_dispatch_request_ids_are_stable_per_pass_seed_and_differ_across_passes() -> None:
    wf = _wf(
        lambda s: [
            s.mail_send(to="a@example.com", subject="Hi", body="b"),
            s.webhook_send(url="https://hooks.example.com/x", body={"a": 1}, key="hook"),
        ]
    )
    a = _run(wf, seed="tenant|1")
    b = _run(wf, seed="tenant|1")
    c = _run(wf, seed="tenant|5")
    assert [d.request_id for d in a.dispatches] == [d.request_id for d in b.dispatches]
    assert {d.request_id for d in a.dispatches}.isdisjoint(d.request_id for d in c.dispatches)
    mail, hook = a.dispatches
    assert mail.step_kind == "mail.send" and mail.request["to"] == ["a@example.com"]
    assert hook.request["bodyJson"] == '{"a":1}'
    assert a.results["hook"] == {"requestId": hook.request_id}


def test_wait_for_event_suspends_with_match_timeout_and_lookback() -> None:
    wf = _wf(
        lambda s: [
            s.wait_for_event(
                event="order.approved",
                match=lambda ctx: {"version": 1, "expr": {"kind": "and", "nodes": []}},
                timeout="P3D",
                lookback="PT1H",
            )
        ],
        awaits={"approved": "order.approved"},
    )
    result = _run(wf)
    wait = result.suspension.event
    assert result.suspension.kind == "waiting-for-event" and wait is not None
    assert wait.event_type == "order.approved"
    assert result.suspension.wake_at == datetime(2026, 1, 8, 9, 0, tzinfo=UTC)
    assert wait.lookback_from == datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    assert result.suspension.wake_at == NOW + timedelta(days=3)


def test_an_invalid_match_expression_fails_the_step() -> None:
    wf = _wf(
        lambda s: [s.wait_for_event(event="x.y", match=lambda ctx: {"version": 9, "expr": {}})],
        awaits={"a": "x.y"},
    )
    result = _run(wf)
    assert result.outcome == "failed"
    assert result.error == "workflow step failed (InvalidArgument)"
    assert result.reason == "invalid_argument:match"
    assert "EventMatch version 9 is not supported" in str(result.error_detail)


def test_step_at_follows_nested_paths() -> None:
    wf = _wf(
        lambda s: [
            s.branch(if_=True, on_true=[s.for_each(over=[1], as_="x", do=[s.wait(for_="PT1S")])])
        ]
    )
    step = step_at(wf.steps, [{"i": 0, "arm": "true"}, {"i": 0, "item": 0}, {"i": 0}])
    assert step.kind == "wait"


def test_describe_step_error_has_no_message() -> None:
    assert (
        describe_step_error(ValueError("secret@example.com")) == "workflow step failed (ValueError)"
    )
