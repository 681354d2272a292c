"""wait_for_condition through the test kit: the deployed handlers on PostgreSQL, the
clock moved by `advance` — the checks run when their durable timers come due, each
recorded with its state, until Done, the last attempt, the timeout or a check that
raises."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from workflow_runner import Continue, Done, define_workflow, on_event
from workflow_runner.durations import parse_instant
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

MakeEnv = Callable[..., WorkflowTestEnv]
START = "2030-01-01T09:00:00Z"
T0 = parse_instant(START)
CONDITION = "workflow.condition.waiting"


def _poller(name: str, check: Any, **kwargs: Any) -> Any:
    return define_workflow(
        name=name,
        trigger=on_event("job.submitted"),
        idempotency_key=lambda e: e.payload["jobId"],
        register=False,
        steps=lambda s: [
            s.wait_for_condition("job", check, **kwargs),
            s.return_(lambda ctx: {"isSuccess": True, "job": ctx.steps["job"]}),
        ],
    )


def _start(make_env: MakeEnv, workflow: Any) -> WorkflowTestEnv:
    env = make_env(workflows=[workflow], now=START)
    env.put_event(tenant=TENANT_A, type="job.submitted", payload={"jobId": "j-1"})
    return env


def _checkpoints(env: WorkflowTestEnv, name: str) -> list[dict[str, Any]]:
    run = env.run(tenant=TENANT_A, workflow=name, key="j-1")
    return [e.payload for e in run.events if e.type == CONDITION]


def test_done_after_three_checks_each_checkpointed_with_its_state(make_env: MakeEnv) -> None:
    seen: list[tuple[Any, Any]] = []

    def check(ctx: Any, state: Any) -> Any:
        seen.append((ctx.now, state))
        if state["polls"] == 2:
            return Done({"status": "finished", "polls": 3})
        return Continue({"polls": state["polls"] + 1})

    env = _start(make_env, _poller("poll-job", check, initial={"polls": 0}, every="PT30S"))
    run = env.run(tenant=TENANT_A, workflow="poll-job", key="j-1")
    assert (run.status, run.wake_at) == ("waiting", T0 + timedelta(seconds=30))
    assert run.events[-1].text == (
        "step 0: condition 'job' not met on check 1, next check at 2030-01-01T09:00:30Z"
    )
    env.advance("PT29S")
    assert len(seen) == 1  # the timer is not due yet
    env.advance("PT1M")
    run = env.run(tenant=TENANT_A, workflow="poll-job", key="j-1")
    assert run.status == "completed"
    assert run.result == {"isSuccess": True, "job": {"status": "finished", "polls": 3}}
    assert run.steps["job"] == {"status": "finished", "polls": 3}
    assert seen == [
        (T0, {"polls": 0}),
        (T0 + timedelta(seconds=30), {"polls": 1}),
        (T0 + timedelta(seconds=60), {"polls": 2}),
    ]
    points = _checkpoints(env, "poll-job")
    assert [(p["attempts"], p["conditionState"]) for p in points] == [
        (1, {"polls": 1}),
        (2, {"polls": 2}),
    ]
    assert run.event_types.count("workflow.step.resumed") == 2


def test_exponential_backoff_with_a_cap_sets_the_due_times(make_env: MakeEnv) -> None:
    def never(ctx: Any, state: Any) -> Any:
        return Continue(None)

    workflow = _poller(
        "backoff-job", never, every="PT1M", backoff="exponential", cap="PT5M", max_attempts=6
    )
    env = _start(make_env, workflow)
    env.advance("PT1H")
    points = _checkpoints(env, "backoff-job")
    wakes = [parse_instant(p["wakeAt"]) - T0 for p in points]
    # Delays 1, 2, 4, then capped at 5 minutes: checks at 0, 1, 3, 7, 12 and 17 minutes.
    assert wakes == [timedelta(minutes=m) for m in (1, 3, 7, 12, 17)]
    run = env.run(tenant=TENANT_A, workflow="backoff-job", key="j-1")
    assert (run.status, run.reason) == ("failed", "condition_not_met")
    assert run.error == "workflow step failed (ConditionNotMet)"
    assert run.events[-1].recorded_at == T0 + timedelta(minutes=17)


def test_max_attempts_ends_in_condition_not_met(make_env: MakeEnv) -> None:
    calls: list[int] = []

    def never(ctx: Any, state: Any) -> Any:
        calls.append(state)
        return Continue(state + 1)

    env = _start(make_env, _poller("capped-job", never, initial=1, every="PT10S", max_attempts=3))
    env.advance("PT5M")
    run = env.run(tenant=TENANT_A, workflow="capped-job", key="j-1")
    assert (run.status, run.reason) == ("failed", "condition_not_met")
    assert calls == [1, 2, 3]
    assert run.events[1].text.endswith("on check 1 of 3, next check at 2030-01-01T09:00:10Z")


def test_the_timeout_runs_a_last_check_at_its_deadline_then_fails(make_env: MakeEnv) -> None:
    times: list[Any] = []

    def never(ctx: Any, state: Any) -> Any:
        times.append(ctx.now)
        return Continue(None)

    env = _start(make_env, _poller("slow-job", never, every="PT25M", timeout="PT1H"))
    env.advance("PT2H")
    run = env.run(tenant=TENANT_A, workflow="slow-job", key="j-1")
    assert (run.status, run.reason) == ("failed", "condition_not_met")
    assert times == [T0 + timedelta(minutes=m) for m in (0, 25, 50, 60)]
    assert _checkpoints(env, "slow-job")[-1]["timeoutAt"] == "2030-01-01T10:00:00.000000Z"


def test_a_check_that_raises_fails_the_step_at_once(make_env: MakeEnv) -> None:
    calls: list[int] = []

    def flaky(ctx: Any, state: Any) -> Any:
        calls.append(state)
        if state == 2:
            raise ConnectionError("status endpoint refused")
        return Continue(state + 1)

    env = _start(make_env, _poller("flaky-job", flaky, initial=1, every="PT1M"))
    env.advance("PT10M")
    run = env.run(tenant=TENANT_A, workflow="flaky-job", key="j-1")
    assert (run.status, run.reason) == ("failed", "condition_check_failed")
    assert run.error == "workflow step failed (ConnectionError)"
    assert "refused" not in str([e.payload for e in run.events])  # the message is not stored
    assert calls == [1, 2]  # no further check after the one that raised


def test_catch_lets_the_run_go_on_with_the_failure_under_the_key(make_env: MakeEnv) -> None:
    def broken(ctx: Any, state: Any) -> Any:
        raise KeyError("status")

    def never(ctx: Any, state: Any) -> Any:
        return Continue(None)

    workflow = define_workflow(
        name="caught-job",
        trigger=on_event("job.submitted"),
        idempotency_key=lambda e: e.payload["jobId"],
        register=False,
        steps=lambda s: [
            s.wait_for_condition("first", broken, catch=True),
            s.wait_for_condition("second", never, every="PT1M", max_attempts=2, catch=True),
            s.return_(lambda ctx: {"first": ctx.steps["first"], "second": ctx.steps["second"]}),
        ],
    )
    env = _start(make_env, workflow)
    env.advance("PT5M")
    run = env.run(tenant=TENANT_A, workflow="caught-job", key="j-1")
    assert run.status == "completed"
    assert run.result == {
        "first": {
            "failed": True,
            "reason": "condition_check_failed",
            "error": "KeyError",
            "attempts": 1,
        },
        "second": {"failed": True, "reason": "condition_not_met", "attempts": 2},
    }


def _counting(ctx: Any, state: Any) -> Any:
    return Done({"checks": state + 1}) if state + 1 == 3 else Continue(state + 1)


def _flow(steps: Any) -> Any:
    return define_workflow(
        name="migrated-poll",
        trigger=on_event("job.submitted"),
        idempotency_key=lambda e: e.payload["jobId"],
        register=False,
        steps=steps,
    )


def test_a_run_polling_moves_with_its_checks_and_state_to_a_new_place(
    make_env: MakeEnv,
) -> None:
    before = _flow(lambda s: [s.wait_for_condition("job", _counting, initial=0, every="PT1M")])
    env = _start(make_env, before)
    env.advance("PT1M")  # checks 1 and 2 done
    inserted = _flow(
        lambda s: [
            s.compute("plan", lambda ctx: "new"),
            s.wait_for_condition("job", _counting, initial=0, every="PT1M"),
        ]
    )
    assert [p.failing for p in env.redeploy(workflows=[inserted], keep_previous=False)] == [1]
    report = env.migrate_runs(workflow="migrated-poll", to_version=1, mapping=["0=1"])
    assert [m.outcome for m in report.moves] == ["moved"]
    env.advance("PT1M")
    run = env.run(tenant=TENANT_A, workflow="migrated-poll", key="j-1")
    # The third check ran at the new place with the state of the second: no check again.
    assert (run.status, run.steps["job"]) == ("completed", {"checks": 3})
    assert "plan" not in run.steps
