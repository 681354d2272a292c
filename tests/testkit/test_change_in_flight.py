"""Change in flight (issue 32): what a deploy does to runs waiting on the definition it
changes, change by change — the README's table, a row a test. A run resumes on the new
definition when its shape agrees where the run has been and where it stands; the new
values and code apply to the rest of the run. A change that would make it resume at
another place, or read a result back under another key, leaves it on its old code, kept
as AWS keeps the function version that has it — and fails it loud, the step path in the
failure's detail, once that old code is gone too (`redeploy(keep_previous=False)`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflow_runner import Event, Steps, define_workflow, on_event
from workflow_runner.definition import WorkflowDefinition
from workflow_runner.match import eq
from workflow_runner.testing import WorkflowTestEnv

from tests.support import TENANT_A

T0 = "2030-01-01T09:00:00Z"
MakeEnv = Callable[..., WorkflowTestEnv]


def flow(steps: Callable[[Any], list[Any]], **kwargs: Any) -> WorkflowDefinition:
    options: dict[str, Any] = {"trigger": on_event("trial.started")}
    options.update(kwargs)
    return define_workflow(
        name="trial",
        idempotency_key=Event.payload["id"],
        steps=steps,
        register=False,
        **options,
    )


def start(make_env: MakeEnv, definition: WorkflowDefinition, runs: int = 1) -> WorkflowTestEnv:
    env = make_env(workflows=[definition], now=T0)
    for n in range(runs):
        env.put_event(tenant=TENANT_A, type="trial.started", payload={"id": f"t{n}"})
    assert {r.status for r in env.runs(tenant=TENANT_A, workflow="trial")} == {"waiting"}
    return env


def trial(env: WorkflowTestEnv, n: int = 0) -> Any:
    return env.run(tenant=TENANT_A, workflow="trial", key=f"t{n}")


def trial_by_key(env: WorkflowTestEnv, key: str) -> Any:
    return env.run(tenant=TENANT_A, workflow="trial", key=key)


def assert_fails_loud(env: WorkflowTestEnv, difference: str) -> None:
    run = trial(env)
    assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
    assert run.error.endswith(f"It resumes on no registered definition: v1: {difference}.")


# --- edit a subject --------------------------------------------------------------------


def mail_after_a_day(subject: str) -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.wait(for_="P1D"),
            s.mail_send(to="ada@example.com", subject=subject, body="Your trial ends soon."),
            s.return_({"isSuccess": True}),
        ]
    )


def test_a_copy_edit_deployed_mid_wait_leaves_every_waiting_run_to_complete(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"), runs=3)
    assert env.redeploy(workflows=[mail_after_a_day("Your trial ends in 3 days")]) == []
    env.advance("P1D")
    assert {r.status for r in env.runs(tenant=TENANT_A, workflow="trial")} == {"completed"}
    assert [m.subject for m in env.mails] == ["Your trial ends in 3 days"] * 3


# --- change a wait's duration ------------------------------------------------------------


def two_waits(first: str, second: str) -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.wait(for_=first),
            s.compute("between", lambda ctx: ctx.now.isoformat()),
            s.wait(for_=second),
            s.return_({"isSuccess": True}),
        ]
    )


def test_a_changed_duration_keeps_the_running_wait_and_times_the_next_one(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, two_waits("P1D", "PT1H"))
    assert env.redeploy(workflows=[two_waits("P2D", "PT2H")]) == []
    env.advance("P1D")  # the wait it was in ends as it was given: after one day
    assert trial(env).status == "waiting"
    assert trial(env).steps["between"] == "2030-01-02T09:00:00+00:00"
    env.advance("PT1H")
    assert trial(env).status == "waiting"  # the next wait is the new one's: two hours
    env.advance("PT1H")
    assert trial(env).status == "completed"


# --- insert a step before / after the run's position --------------------------------------


def plan_inserted_before_the_wait() -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.compute("plan", lambda ctx: "pro"),
            s.wait(for_="P1D"),
            s.mail_send(to="ada@example.com", subject="Trial ends", body="-"),
            s.return_({"isSuccess": True}),
        ]
    )


def test_a_step_inserted_before_the_runs_position_fails_it_loud_once_its_code_is_gone(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"))
    inserted = plan_inserted_before_the_wait()
    [failing] = env.redeploy(workflows=[inserted], keep_previous=False)
    assert failing.differences == {"step 0 (wait)": "v1: step 0 (wait): wait → compute"}
    env.advance("P1D")
    assert_fails_loud(env, "step 0 (wait): wait → compute")
    assert env.mails == []  # nothing ran at a wrong place


def test_runs_a_step_inserted_before_their_position_would_fail_complete_once_migrated(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"), runs=2)
    inserted = plan_inserted_before_the_wait()
    # Once the code they started on is gone, without the migration both would fail.
    [failing] = env.redeploy(workflows=[inserted], keep_previous=False)
    assert failing.failing == 2
    dry = env.migrate_runs(workflow="trial", to_version=1, mapping=["0=1"], dry_run=True)
    assert [m.outcome for m in dry.moves] == ["would-move", "would-move"]
    assert env.pinned_definitions()[0].failing == 2  # a dry run writes nothing
    report = env.migrate_runs(workflow="trial", to_version=1, mapping=["0=1"])
    assert report.complete and [m.outcome for m in report.moves] == ["moved", "moved"]
    assert [p.fails for p in env.pinned_definitions()] == [False]
    env.advance("P1D")
    runs = env.runs(tenant=TENANT_A, workflow="trial")
    assert [r.result for r in runs] == [{"isSuccess": True}] * 2
    # They went on after the wait: the step inserted before it never ran for them.
    assert ["plan" in r.steps for r in runs] == [False, False]
    assert len(env.mails) == 2


def test_a_step_inserted_after_the_runs_position_runs_for_it(make_env: MakeEnv) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"))
    inserted = flow(
        lambda s: [
            s.wait(for_="P1D"),
            s.compute("plan", lambda ctx: "pro"),
            s.mail_send(to="ada@example.com", subject="Trial ends", body="-"),
            s.return_({"isSuccess": True, "plan": Steps["plan"]}),
        ]
    )
    assert env.redeploy(workflows=[inserted]) == []
    env.advance("P1D")
    assert trial(env).result == {"isSuccess": True, "plan": "pro"}


# --- rename a result key ---------------------------------------------------------------------


def keyed(key: str, before_the_wait: bool) -> WorkflowDefinition:
    def steps(s: Any) -> list[Any]:
        computed = s.compute(key, lambda ctx: 42)
        waited = s.wait(for_="P1D")
        done = s.return_({"isSuccess": True, "value": Steps[key]})
        return [computed, waited, done] if before_the_wait else [waited, computed, done]

    return flow(steps)


def test_a_result_key_renamed_before_the_runs_position_fails_it_loud_once_its_code_is_gone(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, keyed("seats", before_the_wait=True))
    [failing] = env.redeploy(
        workflows=[keyed("licences", before_the_wait=True)], keep_previous=False
    )
    assert failing.differences == {
        "step 1 (wait)": "v1: step 0 (compute): key 'seats' → 'licences'"
    }
    env.advance("P1D")
    assert_fails_loud(env, "step 0 (compute): key 'seats' → 'licences'")


def test_a_result_key_renamed_after_the_runs_position_is_the_new_codes(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, keyed("seats", before_the_wait=False))
    assert env.redeploy(workflows=[keyed("licences", before_the_wait=False)]) == []
    env.advance("P1D")
    assert trial(env).result == {"isSuccess": True, "value": 42}
    assert "licences" in trial(env).steps


# --- change a task's function ------------------------------------------------------------------


def old_provider(ctx: Any) -> dict[str, str]:
    raise ConnectionError("the old provider is down")


def new_provider(ctx: Any) -> dict[str, str]:
    return {"provider": "new", "attempt": str(ctx.workflow.retry_attempt)}


def charging(fn: Callable[[Any], Any]) -> WorkflowDefinition:
    from workflow_runner import RetryPolicy

    return flow(
        lambda s: [
            s.task("charge", fn, retry=RetryPolicy(max_attempts=3, base="PT1M")),
            s.return_({"isSuccess": True, "charge": Steps["charge"]}),
        ]
    )


def test_a_changed_task_function_runs_from_the_next_attempt_on(make_env: MakeEnv) -> None:
    env = start(make_env, charging(old_provider))  # attempt 1 failed, 2 is due in a minute
    assert env.redeploy(workflows=[charging(new_provider)]) == []
    env.advance("PT2M")
    assert trial(env).result == {"isSuccess": True, "charge": {"provider": "new", "attempt": "2"}}


# --- add an awaits entry -----------------------------------------------------------------------


def waiting_for_payment(awaits: dict[str, str]) -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.wait_for_event("paid", match=eq("id", Event.payload["id"]), timeout="P14D"),
            s.return_({"isSuccess": True, "paid": Steps["order.paid"]}),
        ],
        awaits=awaits,
    )


def test_an_added_awaits_entry_leaves_the_waiting_run_waiting_for_its_event(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, waiting_for_payment({"paid": "order.paid"}))
    wider = waiting_for_payment({"paid": "order.paid", "refunded": "order.refunded"})
    assert env.redeploy(workflows=[wider]) == []
    env.put_event(tenant=TENANT_A, type="order.paid", payload={"id": "t0", "amount": 9})
    assert trial(env).result["paid"]["amount"] == 9


# --- change the trigger --------------------------------------------------------------------------


def test_a_changed_trigger_fails_the_waiting_run_loud_once_its_code_is_gone(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"))
    retriggered = flow(
        lambda s: [
            s.wait(for_="P1D"),
            s.mail_send(to="ada@example.com", subject="Trial ends", body="-"),
            s.return_({"isSuccess": True}),
        ],
        trigger=on_event("trial.begun"),
    )
    [failing] = env.redeploy(workflows=[retriggered], keep_previous=False)
    assert "the trigger changed" in failing.verdict
    env.advance("P1D")
    run = trial(env)
    assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
    assert "the trigger changed (on_event('trial.started') → on_event('trial.begun'))" in run.error


# --- pinning="exact" ------------------------------------------------------------------------------


def pinned(subject: str) -> WorkflowDefinition:
    return flow(
        lambda s: [
            s.wait(for_="P1D"),
            s.mail_send(to="ada@example.com", subject=subject, body="-"),
        ],
        pinning="exact",
    )


def test_an_exactly_pinned_workflow_fails_its_runs_on_a_copy_edit_once_its_code_is_gone(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, pinned("Trial ends"))
    [failing] = env.redeploy(workflows=[pinned("Your trial ends")], keep_previous=False)
    assert "pinned exactly" in failing.verdict
    env.advance("P1D")
    run = trial(env)
    assert (run.status, run.reason) == ("failed", "workflow_definition_changed")
    assert env.mails == []


def test_pinning_is_not_part_of_the_fingerprint() -> None:
    def steps(s: Any) -> list[Any]:
        return [s.wait(for_="P1D")]

    by_shape, exact = flow(steps), flow(steps, pinning="exact")
    assert (by_shape.pinning, exact.pinning) == ("shape", "exact")
    assert by_shape.fingerprint == exact.fingerprint


# --- kept code: a structural change leaves the run on its old code -------------------------


def test_a_structural_edit_deployed_mid_wait_leaves_the_run_to_finish_on_its_old_code(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, mail_after_a_day("Trial ends"), runs=2)
    inserted = flow(
        lambda s: [
            s.compute("plan", lambda ctx: "pro"),
            s.wait(for_="P1D"),
            s.mail_send(to="ada@example.com", subject="Pick a plan", body="-"),
            s.return_({"isSuccess": True, "plan": Steps["plan"]}),
        ]
    )
    assert env.redeploy(workflows=[inserted]) == []
    [kept] = env.pinned_definitions()
    assert (kept.exact, kept.by_shape, kept.kept, kept.failing) == (0, 0, 2, 0)
    assert kept.kept_on == ("the code before redeploy 1",)
    assert kept.verdict == "stay on kept version the code before redeploy 1"
    env.advance("P1D")
    assert [r.result for r in env.runs(tenant=TENANT_A, workflow="trial")] == [
        {"isSuccess": True}
    ] * 2
    assert [m.subject for m in env.mails] == ["Trial ends"] * 2  # the old code's mail
    env.put_event(tenant=TENANT_A, type="trial.started", payload={"id": "new"})
    assert trial_by_key(env, "new").steps["plan"] == "pro"  # new runs start on the new code


def test_a_task_of_a_run_left_on_its_old_code_runs_the_old_function(make_env: MakeEnv) -> None:
    from workflow_runner import RetryPolicy

    def old_charge(ctx: Any) -> dict[str, str]:
        if ctx.workflow.retry_attempt == 1:
            raise ConnectionError("the provider is down")
        return {"provider": "old"}

    env = start(make_env, charging(old_charge))  # attempt 1 failed, 2 is due in a minute
    restructured = flow(
        lambda s: [
            s.compute("amount", lambda ctx: 42),
            s.task("charge", new_provider, retry=RetryPolicy(max_attempts=3, base="PT1M")),
            s.return_({"isSuccess": True, "charge": Steps["charge"]}),
        ]
    )
    assert env.redeploy(workflows=[restructured]) == []
    env.advance("PT2M")
    assert trial(env).result == {"isSuccess": True, "charge": {"provider": "old"}}


def test_code_kept_over_several_deploys_serves_the_runs_of_each(make_env: MakeEnv) -> None:
    env = start(make_env, keyed("seats", before_the_wait=True))
    assert env.redeploy(workflows=[keyed("licences", before_the_wait=True)]) == []
    env.put_event(tenant=TENANT_A, type="trial.started", payload={"id": "t1"})
    assert env.redeploy(workflows=[keyed("users", before_the_wait=True)]) == []
    assert sorted(p.kept for p in env.pinned_definitions()) == [1, 1]
    env.advance("P1D")
    assert trial(env, 0).result == {"isSuccess": True, "value": 42}
    assert "seats" in trial(env, 0).steps and "licences" in trial(env, 1).steps


def test_an_exactly_pinned_run_stays_on_its_very_definition_while_it_is_kept(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, pinned("Trial ends"))
    assert env.redeploy(workflows=[pinned("Your trial ends")]) == []
    env.advance("P1D")
    assert trial(env).status == "completed"
    assert [m.subject for m in env.mails] == ["Trial ends"]


def test_a_run_left_on_kept_code_fails_loud_when_a_later_deploy_drops_it(
    make_env: MakeEnv,
) -> None:
    env = start(make_env, keyed("seats", before_the_wait=True))
    assert env.redeploy(workflows=[keyed("licences", before_the_wait=True)]) == []
    [failing] = env.redeploy(
        workflows=[keyed("licences", before_the_wait=True)], keep_previous=False
    )
    assert (failing.kept, failing.failing) == (0, 1)
    env.advance("P1D")
    assert_fails_loud(env, "step 0 (compute): key 'seats' → 'licences'")
